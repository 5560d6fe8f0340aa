"""``python -m autograder grade COURSE_DIR [ASSIGNMENT]``: grade a cohort with nbgrader.

``COURSE_DIR`` is an nbgrader course laid out as usual (``nbgrader_config.py``, the source
notebooks, ``submitted/<student>/<assignment>/``). Every submission is autograded in its own
process, with a progress bar; a broken, hanging or hostile submission is recorded as such
and grading moves on. The gradebook is copied aside before each submission and restored if
a submission damaged it or touched another student's grades. Scores go to a CSV.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

from tqdm import tqdm

from . import nbgrader_run
from .nbgrader_run import Outcome, SetupError
from .report import Result

CSV_FIELDS = ["student_id", "assignment", "score", "max_score", "status", "failed_checks", "flags",
              "static_findings"]


def submissions(course: Path, assignment: str | None) -> list[tuple[str, str]]:
    """(student, assignment) pairs found under ``submitted/``."""
    submitted = course / "submitted"
    if not (course / "nbgrader_config.py").exists():
        raise SetupError(f"{course} is not an nbgrader course (no nbgrader_config.py)")
    if not submitted.is_dir():
        raise SetupError(f"{course} has no submitted/ folder")
    pairs = sorted((s.name, a.name) for s in submitted.iterdir() if s.is_dir()
                   for a in s.iterdir() if a.is_dir() and assignment in (None, a.name))
    if not pairs:
        raise SetupError(f"no submissions{' for ' + assignment if assignment else ''} in {submitted}")
    return pairs


def grade_one(course: Path, student: str, assignment: str, **limits) -> Outcome:
    """Autograde one submission, protecting everyone else's grades from it."""
    db = course / "gradebook.db"
    before = nbgrader_run.protected(db, student)
    backup = nbgrader_run.snapshot(db)
    outcome = nbgrader_run.autograde(course, assignment, student, **limits)
    keep_log(course, outcome)
    if backup is not None and nbgrader_run.protected(db, student) != before:
        shutil.copy2(backup, db)
        why = "the submission changed the gradebook; it was restored and this submission scores 0"
        outcome.results = [Result(r.name, 0.0, r.max_score, why) for r in outcome.results]
        outcome.error = why
    if backup is not None:
        backup.unlink(missing_ok=True)
    return outcome


def keep_log(course: Path, outcome: Outcome) -> None:
    """nbgrader's full output for one submission, next to its autograded notebook."""
    folder = course / "autograded" / outcome.student / outcome.assignment
    if folder.is_dir():
        (folder / "autograde.log").write_text(outcome.log)


def write_csv(outcomes: list[Outcome], path: Path) -> None:
    """One row per submission: score, maximum, and what failed."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for o in outcomes:
            failed = [r.name for r in o.results if not r.passed]
            w.writerow({"student_id": o.student, "assignment": o.assignment, "score": f"{o.score:g}",
                        "max_score": f"{o.max_score:g}", "status": f"error: {o.error}" if o.error else "graded",
                        "failed_checks": " ".join(failed), "flags": " ".join(o.flags),
                        "static_findings": len(o.findings)})


def run(course: Path, assignment: str | None = None, *, csv_path: Path | None = None, **limits) -> int:
    """Grade every submission; exit code 0 when all were graded, 1 when any failed to grade."""
    course = Path(course).resolve()
    pairs = submissions(course, assignment)
    for a in sorted({a for _, a in pairs}):
        nbgrader_run.ensure_assignment(course, a)
    outcomes = []
    for student, a in tqdm(pairs, desc="grading", unit="submission"):
        o = grade_one(course, student, a, **limits)
        outcomes.append(o)
        tqdm.write(f"{student} {a}: {o.score:g}/{o.max_score:g}" + (f"  error: {o.error}" if o.error else "")
                   + (f"  flagged: the kernel reported passes the grader did not confirm: {' '.join(o.flags)}"
                      if o.flags else "")
                   + (f"  ended {len(o.killed)} leftover process(es)" if o.killed else "")
                   + (f"  static check: {len(o.findings)} finding(s), see autograde.log" if o.findings else ""))
    csv_path = Path(csv_path) if csv_path else course / "grades.csv"
    write_csv(outcomes, csv_path)
    print(f"wrote {csv_path} ({len(outcomes)} submissions)")
    return 1 if any(o.error for o in outcomes) else 0
