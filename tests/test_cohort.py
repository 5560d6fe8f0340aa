"""The cohort grader's bookkeeping, without running notebooks: submissions found, CSV
written, and a gradebook damaged by a submission restored."""

from __future__ import annotations

import csv
import sqlite3

import pytest

from autograder import cohort, nbgrader_run
from autograder.nbgrader_run import Outcome, SetupError
from autograder.report import Result


def _gradebook(path):
    with sqlite3.connect(path) as con:
        con.executescript("""
            create table submitted_assignment (id text, assignment_id text, student_id text);
            create table submitted_notebook (id text, assignment_id text, notebook_id text);
            create table grade (id text, notebook_id text, cell_id text, auto_score float, manual_score float);
            create table base_cell (id text, name text, notebook_id text, type text);
            insert into base_cell values ('c1', 'test-a', 'n', 'GradeCell');
            insert into submitted_assignment values ('sa1', 'a', 'alice'), ('sa2', 'a', 'bob');
            insert into submitted_notebook values ('sn1', 'sa1', 'n'), ('sn2', 'sa2', 'n');
            insert into grade values ('g1', 'sn1', 'c1', 2, null), ('g2', 'sn2', 'c1', 1, null);
        """)


ALICE = ([("alice", "c1", 2.0, None)], [("c1", "test-a", "n", "GradeCell")])


def test_protected_rows_read_the_real_schema(tmp_path):
    db = tmp_path / "gradebook.db"
    _gradebook(db)
    assert nbgrader_run.protected(db, "bob") == ALICE
    with sqlite3.connect(db) as con:  # a graded cell added from a notebook changes them too
        con.execute("insert into base_cell values ('c2', 'test-bonus', 'n', 'GradeCell')")
    assert nbgrader_run.protected(db, "bob") != ALICE
    db.write_bytes(b"not a database")
    assert nbgrader_run.protected(db, "bob") is None


def test_a_submission_that_damages_the_gradebook_is_undone(tmp_path, monkeypatch):
    db = tmp_path / "gradebook.db"
    _gradebook(db)

    def hostile(course, assignment, student, **limits):
        with sqlite3.connect(course / "gradebook.db") as con:
            con.execute("update grade set auto_score = 0")
        return Outcome(student, assignment, [Result("x", 1, 1)])

    monkeypatch.setattr(nbgrader_run, "autograde", hostile)
    outcome = cohort.grade_one(tmp_path, "bob", "a")
    assert outcome.score == 0 and "changed the gradebook" in outcome.error
    assert nbgrader_run.protected(db, "bob") == ALICE
    assert not db.with_name("gradebook.db.bak").exists()


def test_submissions_and_csv(tmp_path):
    with pytest.raises(SetupError, match="not an nbgrader course"):
        cohort.submissions(tmp_path, None)
    (tmp_path / "nbgrader_config.py").write_text("")
    with pytest.raises(SetupError, match="no submitted/"):
        cohort.submissions(tmp_path, None)
    for student, lab in [("s1", "00_measure"), ("s2", "00_measure"), ("s2", "01_actor_scaling")]:
        (tmp_path / "submitted" / student / lab).mkdir(parents=True)
    assert cohort.submissions(tmp_path, "00_measure") == [("s1", "00_measure"), ("s2", "00_measure")]
    with pytest.raises(SetupError, match="no submissions for 02"):
        cohort.submissions(tmp_path, "02_restart_recovery")

    out = tmp_path / "grades.csv"
    cohort.write_csv([Outcome("s1", "00_measure", [Result("a", 2, 2), Result("b", 0, 1, "why")],
                              findings=["cell 3 (throughput), line 1: imports gc: ..."]),
                      Outcome("s2", "00_measure", [], "nbgrader autograde failed: the kernel died")], out)
    rows = list(csv.DictReader(out.open()))
    assert rows[0] == {"student_id": "s1", "assignment": "00_measure", "score": "2", "max_score": "3",
                       "status": "graded", "failed_checks": "b", "flags": "", "static_findings": "1"}
    assert rows[1]["status"].startswith("error: nbgrader autograde failed")
