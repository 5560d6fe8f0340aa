"""The authors' walkthrough (docs/authors/writing-a-check.md#walkthrough), executed: a new
check added to a throw-away copy of the kit in the two files the page names, the learner's
copy regenerated with nbgrader, and the copy's own ``check`` grading it -- full marks for the
solution, 0 for the blank lab. The code run is the page's own, so the page cannot go stale."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "authors" / "writing-a-check.md"
LAB = "00_measure"


def _block(marker: str) -> str:
    """The fenced Python block right after ``<!-- walkthrough:marker -->`` on the page."""
    m = re.search(rf"<!-- walkthrough:{marker} -->\s*```python\n(.*?)```", PAGE.read_text(), re.S)
    assert m, f"the walkthrough's {marker} block is gone from {PAGE.name}"
    return m.group(1)


def _env(kit: Path) -> dict:
    """The copy first on the path; the venv's tools (nbgrader runs ``alembic``) on ``PATH``."""
    return {**os.environ, "PYTHONPATH": str(kit),
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}


def _check(kit: Path, notebook: str) -> dict:
    env = _env(kit)
    proc = subprocess.run([sys.executable, "-m", "autograder", "check", notebook, "--json"], cwd=kit, env=env,
                          capture_output=True, text=True, timeout=900)
    report = json.loads(proc.stdout)
    return {r["name"]: (r["score"], r["max_score"]) for r in report["checks"]}


@pytest.mark.slow
@pytest.mark.grading
def test_the_walkthrough_adds_a_check_in_two_files_and_grades_it(tmp_path):
    kit = tmp_path / "kit"
    for name in ("autograder", "course", "solutions"):
        shutil.copytree(ROOT / name, kit / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "nbgrader_config.py", kit)
    checks = kit / "autograder" / "labs" / "lab00" / "checks.py"
    checks.write_text(checks.read_text() + "\n\n" + _block("check"))
    subprocess.run([sys.executable, "-c", _block("cell")], cwd=kit, check=True, timeout=60)
    subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", LAB, "--force"], cwd=kit, check=True,
                   capture_output=True, timeout=300, env=_env(kit))
    solved = _check(kit, f"solutions/{LAB}/{LAB}.ipynb")
    assert solved["ray-task-large"] == (1, 1) and all(s == m for s, m in solved.values()), solved
    blank = _check(kit, f"labs/{LAB}/{LAB}.ipynb")
    assert blank["ray-task-large"] == (0, 1), blank
