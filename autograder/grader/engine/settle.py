"""A graded submission's last steps, taken only by the process that started ``grade`` (the one
writer), whether it graded the submission itself or a grading slot sent the result back
(:mod:`autograder.grader.engine.pool`)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from ...report import Outcome, Result
from ..nbgrading import scratch_course


def settle(course: Path, outcome: Outcome, left_out: list[str], left_behind: list[str],
           changed: list[str]) -> Outcome:
    """A graded submission's last steps, in the process that started ``grade``: what was not
    graded or not brought back, a zero for a submission that changed the course or the kit,
    the log next to the autograded notebook, and the grade in the real gradebook."""
    outcome = replace(outcome, findings=[
        *outcome.findings, *(f"submitted file not graded (only the notebook is): {f}" for f in left_out),
        *(f"autograded file not kept (a link, pipe or device, or too large): {f}" for f in left_behind)])
    if changed:
        why = (f"the submission changed the course's or the kit's own files ({', '.join(changed[:3])}"
               f"{', ...' if len(changed) > 3 else ''}); they were put back and this submission scores 0")
        outcome = replace(outcome, results=[Result(r.name, 0.0, r.max_score, why) for r in outcome.results],
                          error=why, log=outcome.log + f"\n[autograder | put back] {' '.join(changed)}")
    keep_log(course, outcome)
    if outcome.results:
        late = scratch_course.record(course, outcome.assignment, outcome.student, outcome.results)
        outcome = replace(outcome, seconds_late=late.seconds, late_penalty=late.penalty)
    return outcome


def keep_log(course: Path, outcome: Outcome) -> None:
    """nbgrader's full output for one submission, next to its autograded notebook."""
    folder = course / "autograded" / outcome.student / outcome.assignment
    if folder.is_dir() and not folder.is_symlink():
        log = folder / "autograde.log"
        if log.is_dir() and not log.is_symlink():
            shutil.rmtree(log)
        log.unlink(missing_ok=True)  # a link left there must not be written through
        log.write_text(outcome.log)
