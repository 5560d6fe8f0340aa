"""The cohort grader's bookkeeping, without running notebooks: submissions found, CSV written,
scratch courses made from a real gradebook, only the grader's scores merged back, and a real
gradebook changed by a submission restored."""

from __future__ import annotations

import csv
import sqlite3
import tempfile
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from autograder import cohort, nbgrader_run, scratch_course
from autograder.nbgrader_run import Outcome, SetupError
from autograder.report import Result
from notebooks import make_course, released, submit


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A real nbgrader course with two labs, and alice's graded lab 00 in its gradebook."""
    course = make_course(tmp_path_factory.mktemp("cohort") / "course", ["00_measure", "02_restart_recovery"])
    for lab in ("00_measure", "02_restart_recovery"):
        nbgrader_run.ensure_assignment(course, lab)
    submit(course, "bob", "00_measure", released("00_measure"))
    scratch_course.record(course, "00_measure", "alice", [Result("ray-task", 2, 2), Result("batch-model", 0, 2)])
    return course


def _alice(course):
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return gb.find_submission("00_measure", "alice").score


def test_the_template_knows_every_lab_and_no_student(course, tmp_path):
    db = scratch_course.template(course, tmp_path / "gradebook.db")
    with Gradebook(f"sqlite:///{db}") as gb:
        assert sorted(a.name for a in gb.assignments) == ["00_measure", "02_restart_recovery"]
        assert gb.students == [] and len(gb.find_assignment("00_measure").notebooks[0].grade_cells) > 0
    assert _alice(course) == 2  # the real gradebook keeps its students


def test_a_scratch_course_holds_one_submission(course, tmp_path):
    db = scratch_course.template(course, tmp_path / "template.db")
    scratch = scratch_course.make(course, "bob", "00_measure", db, tmp_path / "s")
    assert sorted(p.relative_to(scratch).as_posix() for p in scratch.rglob("*") if p.is_file()) == [
        "gradebook.db", "nbgrader_config.py", "submitted/bob/00_measure/00_measure.ipynb"]


def test_record_writes_the_graders_scores_for_that_student_and_lab_only(course):
    scratch_course.record(course, "00_measure", "carol", [Result("ray-task", 2, 2), Result("not-a-check", 9, 9)])
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_submission("00_measure", "carol").score == 2
        assert gb.find_grade("test-ray-task", "00_measure", "00_measure", "carol").manual_score is None
    assert _alice(course) == 2


def test_a_submission_that_changes_the_real_gradebook_scores_0_and_is_undone(course, monkeypatch):
    def hostile(scratch, assignment, student, **limits):
        assert scratch != course and not (scratch / "submitted" / "alice").exists()
        with sqlite3.connect(course / "gradebook.db") as con:  # found the real one anyway
            con.execute("update grade set auto_score = 0")
        return Outcome(student, assignment, [Result("ray-task", 2, 2)])

    before = scratch_course.fingerprint(course / "gradebook.db")
    monkeypatch.setattr(nbgrader_run, "autograde", hostile)
    with tempfile.TemporaryDirectory() as tmp:
        gradebook = scratch_course.template(course, Path(tmp) / "gradebook.db")
        outcome = cohort.grade_one(course, "bob", "00_measure", gradebook)
    assert outcome.score == 0 and "changed the real gradebook" in outcome.error
    assert _alice(course) == 2
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_submission("00_measure", "bob").score == 0  # recorded, as the grader scored it
    assert not (course / "gradebook.db.bak").exists()
    assert before != scratch_course.fingerprint(course / "gradebook.db")  # bob's row was added after


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
                              findings=["cell 3 (throughput), line 1: imports gc: ..."], seconds=41.6),
                      Outcome("s2", "00_measure", [], "nbgrader autograde failed: the kernel died")], out)
    rows = list(csv.DictReader(out.open()))
    assert rows[0] == {"student_id": "s1", "assignment": "00_measure", "score": "2", "max_score": "3",
                       "status": "graded", "failed_checks": "b", "flags": "", "static_findings": "1",
                       "seconds": "42"}
    assert rows[1]["status"].startswith("error: nbgrader autograde failed")
