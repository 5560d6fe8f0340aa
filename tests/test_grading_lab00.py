"""A cohort of lab 00 submissions graded by real `nbgrader autograde` through
`python -m autograder grade`: each broken or hostile submission loses only the points it did
not earn, with a reason, and nobody else's grade is touched. The cohort (tests/cohort_lab00.py)
is graded once per session and shared with tests/test_sandbox_attacks.py, whose OS attacker
goes first in it."""

from __future__ import annotations

import csv
import re
import sqlite3

import pytest

from autograder import cli

from autograder.grader.engine import cohort, engine
from autograder.grader.nbgrading import nbgrader_run
from cohort_lab00 import ENV, LAB, LIMITS, MEMORY_LIMIT_GIB, SOLUTION
from notebooks import sandboxed, variant

pytestmark = [pytest.mark.timeout(1800), pytest.mark.grading]  # the shared fixture grades seven submissions

THROUGHPUT_CHECKS = {"throughput-known-cost", "throughput-sync", "throughput-warmup", "throughput-outliers"}
BATCH_CHECKS = {"batch-model", "batch-real-tier1", "batch-real-tier2"}


@pytest.fixture(scope="module")
def graded(lab00_cohort):
    """Lab 00's cohort (tests/cohort_lab00.py): the OS attacker, the solution, the broken submissions."""
    return lab00_cohort["code"], lab00_cohort["rows"], lab00_cohort["course"]


@pytest.mark.slow
def test_a_second_run_keeps_every_grade_and_grades_nothing_again(graded, monkeypatch):
    code, rows, course = graded
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(engine, "grade_one", lambda *a, **k: pytest.fail(f"graded again: {a[1]}"))
    again = cohort.run(course, LAB, sandboxed=sandboxed(), **LIMITS)
    with open(course / "grades.csv") as f:
        assert again == code and {r["student_id"]: r for r in csv.DictReader(f)} == rows


def failed(row):
    return set(row["failed_checks"].split())


@pytest.mark.slow
def test_exit_code_reports_the_submission_that_could_not_be_graded(graded):
    code, rows, _ = graded
    assert code == 1
    assert sorted(rows) == sorted(["a-attacker", SOLUTION, "carl-memory-bomb", "dave-hangs", "erin-exits",
                                   "ivan-gradebook", "judy-kills-kernel"])


@pytest.mark.slow
def test_solution(graded):  # the blank lab 00: test_nbgrader_run (graded through the venv's python)
    _, rows, course = graded
    assert (rows[SOLUTION]["score"], rows[SOLUTION]["max_score"]) == ("14", "14")
    assert rows[SOLUTION]["status"] == "graded"
    assert {r["sandbox"] for r in rows.values()} == {"bubblewrap" if sandboxed() else "none"}
    # the lesson's demonstrations (graded with the solution) run as written
    assert nbgrader_run.cell_errors(course / "autograded" / SOLUTION / LAB) == []


@pytest.mark.slow
def test_a_memory_bomb_is_stopped_with_its_reason(graded):
    _, rows, _ = graded
    row = rows["carl-memory-bomb"]
    assert row["status"] == f"error: the submission used more than {MEMORY_LIMIT_GIB:g} GiB of memory; it was stopped"
    assert row["score"] == "0" and rows["dave-hangs"]["status"] == "graded"  # and the next one is graded


@pytest.mark.slow
def test_hanging_submission_loses_only_the_hanging_parts(graded):
    _, rows, _ = graded
    row = rows["dave-hangs"]
    # the hanging throughput (and the endless cell after submit_batch) cost only themselves: ray-task is kept
    assert row["status"] == "graded" and failed(row) == THROUGHPUT_CHECKS | BATCH_CHECKS and row["score"] == "2"


@pytest.mark.slow
def test_exits_ray_shutdown_before_every_graded_cell_and_fd_noise_cost_nothing_earned(graded):
    _, rows, _ = graded
    assert rows["erin-exits"]["score"] == "14" and rows["erin-exits"]["status"] == "graded"


@pytest.mark.slow
def test_gradebook_tampering_is_undone(graded):
    _, rows, course = graded
    row = rows["ivan-gradebook"]
    if row["sandbox"] == "bubblewrap":  # the gradebook is nowhere in the sandbox: nothing to undo
        assert row["status"] == "graded"
    else:  # unsandboxed, the kernel found it: put back, and the submission scores 0
        assert row["score"] == "0" and "changed the course's or the kit's own files" in row["status"]
    with sqlite3.connect(course / "gradebook.db") as con:
        alice = con.execute(
            "select sum(g.auto_score) from grade g join submitted_notebook sn on g.notebook_id = sn.id "
            "join submitted_assignment sa on sn.assignment_id = sa.id where sa.student_id = ?", (SOLUTION,)
        ).fetchone()[0]
    assert alice == 14


@pytest.mark.slow
def test_killed_kernel_is_recorded_and_grading_goes_on(graded):
    _, rows, _ = graded
    row = rows["judy-kills-kernel"]
    assert row["status"].startswith("error:") and "kernel died" in row["status"] and row["score"] == "0"
    others = [r["status"] for s, r in rows.items() if s not in ("judy-kills-kernel", "ivan-gradebook", "carl-memory-bomb")]
    assert others == ["graded"] * 4


@pytest.mark.slow
def test_every_student_gets_feedback_and_the_instructor_a_cohort_report(graded):
    """The cohort run's feedback pages carry every check and the grader's own message for each
    failure (dave's hangs: the call deadline); the report has its figures and each check."""
    from autograder.grader.engine import cohort_report
    from autograder.grader.nbgrading import feedback
    from autograder.grader.session.catalog import for_lab

    _, rows, course = graded
    checks = for_lab(LAB)
    graded_ok = [s for s, r in rows.items() if r["status"] == "graded"]
    for student in graded_ok:
        page = (course / "feedback" / student / LAB / feedback.NAME).read_text()
        assert all(f"<b>{name}</b>" in page for name in checks), student
        assert f"<b>{rows[student]['score']}/{rows[student]['max_score']}</b> points" in page, student
    dave = (course / "feedback" / "dave-hangs" / LAB / feedback.NAME).read_text()
    assert dave.count("class=FAIL") == len(THROUGHPUT_CHECKS | BATCH_CHECKS) and re.search(r"past \d+ s", dave)
    report = (course / cohort_report.NAME).read_text()
    assert report.count('src="data:image/png;base64,') == 3 and f"{len(rows)} submission(s)" in report
    assert all(name in report for name in checks) and "kernel died" in report


def test_cli_usage_errors(tmp_path, capsys):
    assert cli.main(["grade", str(tmp_path)]) == 2
    assert "not an nbgrader course" in capsys.readouterr().err
    nb = variant(LAB, tmp_path / "x.ipynb")
    assert cli.main(["check", str(nb)]) == 2
    assert "pass --lab" in capsys.readouterr().err
    assert cli.main(["check", str(nb), "--lab", "99_nothing"]) == 2
    assert cli.main(["check", str(tmp_path / "missing.ipynb")]) == 2
