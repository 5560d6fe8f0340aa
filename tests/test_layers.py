"""Which process runs what, held by import-linter (issue 30): the learner's kernel side -- the
agent, the guard, the channel, the kit steps, each lab's spec and steps, and the package's own
``begin()``/``grade()`` -- never imports the grader's side (the contracts are in pyproject.toml's
``[tool.importlinter]``). The learner's self-check (``autograder.check()``) is the one way in,
on purpose: it runs the checks in the learner's own kernel, where tampering fools only the learner."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _lint(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_kernel_side_never_imports_the_grader_side_and_no_module_imports_itself_back():
    out = _lint()
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "3 kept, 0 broken" in out.stdout, out.stdout[-2000:]


def test_the_contracts_catch_a_kernel_side_import_of_the_grader_and_a_cycle(tmp_path):
    """The same contracts on a copy of the package where a kit step imports the checks, and the
    routines import the agent (which imports them): both broken."""
    copy = tmp_path / "kit"
    shutil.copytree(ROOT / "autograder", copy / "autograder", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    steps = copy / "autograder" / "labs" / "lab02" / "steps.py"
    steps.write_text(steps.read_text() + "\n\ndef _leak():\n    from ...checks import for_lab\n    return for_lab\n")
    routines = copy / "autograder" / "kernel" / "routines.py"
    routines.write_text(routines.read_text() + "\n\ndef _cycle():\n    from .agent import execute\n    return execute\n")
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    out = subprocess.run([exe], cwd=copy, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(copy), "PATH": str(Path(sys.executable).parent)})
    assert out.returncode != 0 and "autograder.labs.lab02.steps -> autograder.checks" in out.stdout, out.stdout[-3000:]
    assert "No cycles are allowed in autograder" in out.stdout and ".routines -> .agent" in out.stdout, out.stdout[-3000:]
