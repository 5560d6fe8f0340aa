"""A throw-away copy of an nbgrader course for one submission, and its grade merged back.

Each submission is autograded in a scratch course of its own: the course's
``nbgrader_config.py``, a gradebook that knows every assignment but no student
(:func:`template`), and that one submission. Whatever the submission's kernel does to *that*
gradebook -- rewrite hidden tests, add graded cells, set its own scores -- ends with it. The
cohort grader then writes the grader's own verdicts for that student and lab into the real
gradebook (:func:`record`) and copies the autograded notebook back (:func:`bring_back`).

A kernel that finds the real gradebook anyway (it runs as the same user) is caught by
:func:`fingerprint`: nothing may change the real gradebook while a submission runs.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from .report import Result

GRADEBOOK = "gradebook.db"


def template(course: Path, dest: Path) -> Path:
    """``dest``: the course's gradebook with every student (and so every submission) removed."""
    from nbgrader.api import Gradebook

    shutil.copy2(course / GRADEBOOK, dest)
    with Gradebook(f"sqlite:///{dest}") as gb:
        for student in [s.id for s in gb.students]:
            gb.remove_student(student)
    return dest


def make(course: Path, student: str, assignment: str, gradebook: Path, root: Path) -> Path:
    """A scratch course under ``root`` holding one submission; its path."""
    scratch = root / "course"
    (scratch / "submitted" / student).mkdir(parents=True)
    shutil.copy2(course / "nbgrader_config.py", scratch)
    shutil.copy2(gradebook, scratch / GRADEBOOK)
    shutil.copytree(course / "submitted" / student / assignment, scratch / "submitted" / student / assignment)
    return scratch


def bring_back(scratch: Path, course: Path, student: str, assignment: str) -> None:
    """The autograded notebook (and anything nbgrader wrote next to it) into the real course."""
    src = scratch / "autograded" / student / assignment
    dst = course / "autograded" / student / assignment
    if dst.exists():
        shutil.rmtree(dst)
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=True)


def record(course: Path, assignment: str, student: str, results: list[Result]) -> None:
    """The grader's per-check scores for one submission, in the real gradebook (created if new).

    Only this student's rows for this assignment are written: the grade of each test cell
    ``test-<check>``, as an automatic score, with no manual score or extra credit.
    """
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{course / GRADEBOOK}") as gb:
        gb.update_or_create_student(student)
        try:
            gb.find_submission(assignment, student)
        except MissingEntry:
            gb.add_submission(assignment, student)
        for r in results:
            try:
                grade = gb.find_grade(f"test-{r.name}", assignment, assignment, student)
            except MissingEntry:
                continue
            grade.auto_score, grade.manual_score, grade.extra_credit = r.score, None, None
        gb.db.commit()


def backup(db: Path) -> Path | None:
    """Copy the real gradebook aside before a submission runs (None when there is none)."""
    if not db.exists():
        return None
    copy = db.with_name(db.name + ".bak")
    shutil.copy2(db, copy)
    return copy


def fingerprint(path: Path) -> str | None:
    """A digest of a file's bytes (None when it does not exist): equal means untouched."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None
