"""The student bundle (``python -m autograder release``): no answers in it, and it self-checks."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from autograder import cli, colab, release
from autograder.grader.errors import SetupError
from notebooks import ROOT, only_extended, released, solution


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    dest = tmp_path_factory.mktemp("release") / "bundle"
    assert cli.main(["release", str(dest)]) == 0
    return dest


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def test_the_bundle_holds_the_learner_copies_and_no_answers(bundle):
    assert not (bundle / "solutions").exists() and not list((bundle / "autograder" / "labs").glob("*/reference"))
    kit = {f for f in _files(ROOT / "autograder") if "reference" not in Path(f).parts}
    assert _files(bundle / "autograder") == kit
    assert _files(bundle / "course") == _files(ROOT / "course")
    for name in release.BUILD:
        assert (bundle / name).read_bytes() == (ROOT / name).read_bytes()
    for lab in released("00_measure").parents[1].iterdir():
        nb = f"{lab.name}/{lab.name}.ipynb"
        assert (bundle / "labs" / nb).read_bytes() == (ROOT / "labs" / nb).read_bytes()
    notebooks = "".join(p.read_text() for p in bundle.rglob("*.ipynb"))
    for mark in release.ANSWER_MARKS:
        assert mark not in notebooks
    text = "".join(p.read_text(errors="ignore") for p in bundle.rglob("*") if p.is_file())
    # not one reference function: no bundle file holds the code of any of them, except where the
    # course library already gives it (lab 04's shard_nodes is course.locality.locations)
    given = "".join(p.read_text() for p in (ROOT / "course").glob("*.py"))
    references = sorted((ROOT / "autograder" / "labs").glob("lab*/reference/__init__.py"))
    assert len(references) == len(list((ROOT / "solutions").iterdir())), references
    for ref in references:
        bodies = [b for b in _bodies(ref.read_text()) if b not in given]
        assert bodies and not any(b in text for b in bodies), ref.parent.parent.name


def _bodies(source: str) -> list[str]:
    """The code (docstring left out) of every function of two or more statements, as written."""
    lines = source.splitlines()
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body[1:] if ast.get_docstring(node) else node.body
            if len(body) >= 2:
                out.append("\n".join(lines[body[0].lineno - 1:body[-1].end_lineno]))
    return out


def test_release_refuses_a_folder_that_is_not_empty_and_labs_with_solutions(bundle, tmp_path):
    with pytest.raises(SetupError, match="not empty"):
        release.release(bundle)
    kit = tmp_path / "kit"
    for folder in ("course", "autograder", "labs"):
        shutil.copytree(ROOT / folder, kit / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in release.BUILD:
        shutil.copy(ROOT / name, kit)
    shutil.copy(solution("00_measure"), kit / "labs" / "00_measure" / "00_measure.ipynb")  # an instructor's slip
    with pytest.raises(SetupError, match="solutions or hidden tests"):
        release.release(tmp_path / "out", kit)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@only_extended("tests/test_colab.py installs the kit in a fresh venv and self-checks lab 00")
def test_the_bundle_installs_in_a_fresh_venv_and_self_checks_lab00(bundle, tmp_path):
    """A lab's setup cell installs the bundle into a new venv (its dependencies from this
    environment's site-packages, added by a .pth file, so nothing is downloaded but the build
    backend); that
    install has no reference solutions, and ``python -m autograder check`` runs lab 00 there:
    the solution passes every check it can run, names the two only grading measures, and the
    learner's copy as shipped scores 0."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "kit-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # installed by a lab's own setup cell, pointed at the bundle (in Colab: at the repository)
    subprocess.run([str(python), "-c", colab.setup_source()], check=True, cwd=tmp_path,
                   env={**env, "COURSE_KIT_SOURCE": str(bundle)})
    found = subprocess.run([str(python), "-c", "import autograder, importlib.util as u; "
                            "print(autograder.__file__, u.find_spec('autograder.labs.lab00.reference'))"],
                           capture_output=True, text=True, check=True, cwd=tmp_path, env=env).stdout
    assert found.startswith(site) and found.strip().endswith("None"), found

    def check(notebook: Path) -> dict:
        proc = subprocess.run([str(python), "-m", "autograder", "check", notebook.name, "--json"], cwd=notebook.parent,
                              capture_output=True, text=True, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)

    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copy(solution("00_measure"), mine / "00_measure.ipynb")
    report = check(mine / "00_measure.ipynb")
    skipped = sorted(c["name"] for c in report["checks"] if c["skipped"])
    assert skipped == ["batch-real-tier1", "batch-real-tier2"]
    assert report["score"] == report["max_score"] == 12 and not report["cell_errors"], report
    blank = check(bundle / "labs" / "00_measure" / "00_measure.ipynb")
    assert blank["score"] == 0 and blank["max_score"] == 12 and blank["cell_errors"], blank
