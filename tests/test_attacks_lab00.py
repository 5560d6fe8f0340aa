"""Hostile lab 00 submissions (tests/attacks_lab00.py) graded as a cohort through the real
grader and real nbgrader: none may score a point its honest part did not earn -- neither in
grades.csv nor in nbgrader's gradebook."""

from __future__ import annotations

import csv
import os
import signal
import time
from pathlib import Path

import pytest

from attacks_lab00 import ATTACKS, LAB, SEED
from autograder import checks, cohort
from notebooks import make_course, submit, variant

pytestmark = pytest.mark.timeout(1800)  # one cohort of ~14 submissions on 2 cores

POINTS = {name: c.points for name, c in checks.for_lab(LAB).items()}


def _stop_daemons(course: Path) -> None:
    """End the processes the daemon attack left behind (each wrote its pid; checked by marker)."""
    for pidfile in course.glob(".*.pid"):
        try:
            pid = int(pidfile.read_text())
            if b"ATTACK-DAEMON" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGTERM)
        except (ValueError, OSError):
            pass


def _gradebook_scores(course: Path) -> dict[str, float]:
    """Each student's total for the lab as nbgrader's gradebook has it (what `nbgrader export` reports)."""
    from nbgrader.api import Gradebook, MissingEntry

    out = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in ATTACKS:
            try:
                out[student] = float(gb.find_submission(LAB, student).score)
            except MissingEntry:
                out[student] = 0.0
    return out


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attacks")
    course = make_course(tmp / "course", [LAB])
    for name, spec in ATTACKS.items():
        kwargs = {k: v for k, v in spec.items() if k not in ("honest", "why", "open_issue")}
        submit(course, name, LAB, variant(LAB, tmp / f"{name}.ipynb", **kwargs))
    mp = pytest.MonkeyPatch()
    mp.setenv("AUTOGRADER_SEED", str(SEED))        # an instructor's fixed seed (README), as attacks assume
    mp.setenv("AUTOGRADER_CALL_TIMEOUT_S", "20")
    started = time.perf_counter()
    try:
        cohort.run(course, LAB, cell_timeout_s=45, timeout_s=600)
        print(f"\ncohort of {len(ATTACKS)} graded in {time.perf_counter() - started:.0f} s")
        time.sleep(3)  # the instructor opens the results a moment later, not within the same millisecond
        with open(course / "grades.csv") as f:
            rows = {r["student_id"]: r for r in csv.DictReader(f)}
        yield rows, _gradebook_scores(course)
    finally:
        mp.undo()
        _stop_daemons(course)


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=spec["open_issue"]))
    if "open_issue" in spec else name for name, spec in ATTACKS.items()])
def test_attack_earns_no_unearned_point(graded, name):
    rows, gradebook = graded
    honest = ATTACKS[name]["honest"]
    assert honest <= set(POINTS), f"unknown checks in {name}'s honest set"
    earned = sum(POINTS[c] for c in honest)
    row = rows.get(name)
    assert row is not None, f"{name} has no row in grades.csv"
    failed = set(row["failed_checks"].split())
    report = (f"{name} ({ATTACKS[name]['why']}): grades.csv score {row['score']}/{row['max_score']}, "
              f"status {row['status']!r}, failed {sorted(failed)}, "
              f"gradebook {gradebook[name]:g}; honest work earns {earned:g} ({sorted(honest)})")
    assert float(row["score"]) == earned and float(row["max_score"]) == sum(POINTS.values()), report
    assert gradebook[name] == earned, report
