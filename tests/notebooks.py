"""Test helpers that build submissions from the kit's notebooks (testbook-style).

A submission is the solution notebook with some cells replaced by grade_id, or extra cells
inserted after one: how a learner's partial, wrong or hostile work looks to nbgrader.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]


def solution(lab: str) -> Path:
    return ROOT / "solutions" / lab / f"{lab}.ipynb"


def released(lab: str) -> Path:
    return ROOT / "labs" / lab / f"{lab}.ipynb"


def answer_cells(path: Path) -> dict[str, str]:
    """The answer cells of the notebook at ``path`` (a solution or a released lab), by grade_id."""
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nbformat.read(path, as_version=4).cells
            if c.metadata.get("nbgrader", {}).get("solution")}


def variant(lab: str, dest: Path, *, replace: dict[str, str] | None = None,
            after: dict[str, list[str]] | None = None, base: Path | None = None,
            demos: bool = True) -> Path:
    """Write ``dest``: the solution (or ``base``) with cells replaced or code cells added.

    ``replace`` maps a grade_id to new source; ``after`` maps a grade_id to sources of plain
    code cells to insert after it. ``demos=False`` first drops the lesson's demonstration
    cells (code cells nbgrader does not track): a bad-submission test needs the graded work,
    not the plots, and each dropped cell saves CI time.
    """
    nb = nbformat.read(base or solution(lab), as_version=4)
    if not demos:
        nb.cells = [c for c in nb.cells if c.cell_type == "markdown" or c.metadata.get("nbgrader")]
    replace, after = dict(replace or {}), dict(after or {})
    cells = []
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in replace:
            cell.source = replace.pop(gid)
        cells.append(cell)
        for src in after.pop(gid, []):
            cells.append(nbformat.v4.new_code_cell(src))
    assert not replace and not after, f"no such grade_id: {sorted({**replace, **after})}"
    nb.cells = cells
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dest)
    return dest


def cell_source(lab: str, grade_id: str) -> str:
    """The solution's source of the cell ``grade_id`` (to build a submission that edits it)."""
    nb = nbformat.read(solution(lab), as_version=4)
    return next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def graded_cells(path: Path) -> dict[str, float]:
    """grade_id -> points of every autograded test cell of a notebook (the kit's own reader)."""
    from autograder.checks.points import graded_cells

    return graded_cells(path)


def make_course(tmp: Path, labs: list[str]) -> Path:
    """An instructor's nbgrader course in ``tmp``: the kit's config and the labs' sources."""
    tmp.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "nbgrader_config.py", tmp)
    for lab in labs:
        shutil.copytree(ROOT / "solutions" / lab, tmp / "solutions" / lab)
    return tmp


def submit(course: Path, student: str, lab: str, notebook: Path) -> None:
    dest = course / "submitted" / student / lab
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(notebook, dest / f"{lab}.ipynb")


def sandboxed() -> bool:
    """Whether gradings in tests run in the OS sandbox: wherever one can be made (CI requires
    it: ``COURSE_KIT_REQUIRE_SANDBOX``), as an instructor's ``grade`` does."""
    from autograder.grader.isolation import sandbox

    return not sandbox.unavailable()


def only_extended(why: str):
    """A mark that skips a test unless the extended set runs; ``why``: what CI has instead."""
    import pytest

    return pytest.mark.skipif(not extended(), reason=f"the extended set: COURSE_KIT_EXTENDED=1 (CI: {why})")


def extended() -> bool:
    """Whether to run the extended set too (``COURSE_KIT_EXTENDED=1``): the OS attack corpus's
    slow part, attack submissions another one covers, regrade stability of every lab, the
    solutions of labs 03-05 at full marks, and the browser test of labs 01-05 -- what CI leaves
    out to stay within its time on a slow 2-core machine (the session notes report their runs)."""
    import os

    return os.environ.get("COURSE_KIT_EXTENDED") == "1" or os.environ.get("COURSE_KIT_ATTACKS_ALL") == "1"
