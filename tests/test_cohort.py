"""The cohort grader's bookkeeping, without running notebooks: submissions found, CSV written,
scratch courses made from a real gradebook, only the grader's scores merged back, and a real
gradebook changed by a submission restored."""

from __future__ import annotations

import csv
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from autograder.grader.engine import cohort, engine, settle
from autograder.grader.nbgrading import nbgrader_run, scratch_course
from autograder.grader.errors import SetupError
from autograder.grader.engine.limits import Limits
from autograder.report import Outcome
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
    db = tmp_path / "gradebook.db"
    db.write_bytes(scratch_course.template(course))
    with Gradebook(f"sqlite:///{db}") as gb:
        assert sorted(a.name for a in gb.assignments) == ["00_measure", "02_restart_recovery"]
        assert gb.students == [] and len(gb.find_assignment("00_measure").notebooks[0].grade_cells) > 0
    assert _alice(course) == 2  # the real gradebook keeps its students


def test_a_scratch_course_holds_one_submission_and_only_its_notebook(course, tmp_path):
    before = set(Path(tempfile.gettempdir()).glob("autograder-template-*"))
    db = scratch_course.template(course)
    assert set(Path(tempfile.gettempdir()).glob("autograder-template-*")) == before  # in memory only
    extra = course / "submitted" / "bob" / "00_measure"
    (extra / "course").mkdir()
    (extra / "course" / "__init__.py").write_text("print('shadowing the kit')")
    (extra / "timestamp.txt").write_text("2026-12-01 10:00:00")
    try:
        scratch, left = scratch_course.make(course, "bob", "00_measure", db, tmp_path / "s")
    finally:
        shutil.rmtree(extra / "course")
        (extra / "timestamp.txt").unlink()
    assert sorted(p.relative_to(scratch).as_posix() for p in scratch.rglob("*") if p.is_file()) == [
        "gradebook.db", "nbgrader_config.py", "submitted/bob/00_measure/00_measure.ipynb",
        "submitted/bob/00_measure/timestamp.txt"]
    assert left == ["course/__init__.py"]


def test_record_writes_the_graders_scores_for_that_student_and_lab_only(course):
    scratch_course.record(course, "00_measure", "carol", [Result("ray-task", 2, 2), Result("not-a-check", 9, 9)])
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_submission("00_measure", "carol").score == 2
        assert gb.find_grade("test-ray-task", "00_measure", "00_measure", "carol").manual_score is None
    assert _alice(course) == 2


def test_a_submission_that_changes_the_course_or_the_kit_scores_0_and_all_is_put_back(course, tmp_path, monkeypatch):
    """The real gradebook, another student's submission, the course config and the kit's code,
    changed, added to or linked by a submission's kernel: all put back from the grader's memory."""
    kit = tmp_path / "kit"
    (kit / "autograder").mkdir(parents=True)
    (kit / "course").mkdir()
    (kit / "autograder" / "checks.py").write_text("REAL = True\n")
    monkeypatch.setattr(nbgrader_run, "KIT_ROOT", kit)
    carol = course / "submitted" / "carol" / "00_measure"
    carol.mkdir(parents=True)
    (carol / "00_measure.ipynb").write_text("carol's work")

    def hostile(scratch, assignment, student, limits, **where):
        assert scratch != course and not (scratch / "submitted" / "alice").exists()
        with sqlite3.connect(course / "gradebook.db") as con:  # found the real one anyway
            con.execute("update grade set auto_score = 0")
        (carol / "00_measure.ipynb").write_text("ruined")
        (carol / "extra.py").write_text("planted")
        (kit / "autograder" / "checks.py").write_text("REAL = False\n")
        (course / "nbgrader_config.py").unlink()
        return Outcome(student, assignment, [Result("ray-task", 2, 2)])

    config = (course / "nbgrader_config.py").read_text()
    monkeypatch.setattr(nbgrader_run, "autograde", hostile)
    try:
        outcome = engine.grade_one(course, "bob", "00_measure", scratch_course.template(course), Limits(sandboxed=False))
    finally:
        shutil.rmtree(carol.parent)
    assert outcome.score == 0 and "changed the course's or the kit's own files" in outcome.error
    assert "put back" in outcome.log and "kit/autograder/checks.py" in outcome.log
    assert _alice(course) == 2 and (course / "nbgrader_config.py").read_text() == config
    assert (kit / "autograder" / "checks.py").read_text() == "REAL = True\n"
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_submission("00_measure", "bob").score == 0  # recorded, as the grader scored it


def test_bring_back_keeps_regular_files_only_and_the_log_is_not_written_through_a_link(course, tmp_path):
    import os

    scratch = tmp_path / "scratch"
    src = scratch / "autograded" / "bob" / "00_measure"
    src.mkdir(parents=True)
    (src / "00_measure.ipynb").write_text("{}")
    os.mkfifo(src / "pipe")
    victim = tmp_path / "victim.ipynb"
    victim.write_text("another student's notebook")
    (src / "autograde.log").symlink_to(victim)
    with open(src / "sparse", "wb") as f:  # 4 KiB on disk, 200 MiB in a copy
        f.seek(200 * 2**20)
        f.write(b"\0")
    left = scratch_course.bring_back(scratch, course, "bob", "00_measure")
    assert sorted(left) == ["autograde.log", "pipe", "sparse"]
    dst = course / "autograded" / "bob" / "00_measure"
    assert sorted(p.name for p in dst.iterdir()) == ["00_measure.ipynb"]
    settle.keep_log(course, Outcome("bob", "00_measure", log="the log"))
    assert (dst / "autograde.log").read_text() == "the log" and victim.read_text() == "another student's notebook"


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
                              findings=["cell 3 (throughput), line 1: imports gc: ..."], seconds=41.6,
                              seconds_late=3600.4, late_penalty=3, peak_memory_bytes=3 * 2**29,
                              peak_disk_bytes=5 * 2**20),
                      Outcome("s2", "00_measure", [], "nbgrader autograde failed: the kernel died")], out)
    rows = list(csv.DictReader(out.open()))
    assert rows[0] == {"student_id": "s1", "assignment": "00_measure", "score": "2", "max_score": "3",
                       "late_penalty": "3", "status": "graded", "failed_checks": "b", "flags": "",
                       "static_findings": "1", "seconds": "42", "seconds_late": "3600", "sandbox": "none",
                       "peak_memory_mib": "1536", "peak_disk_mib": "5"}
    assert rows[1]["status"].startswith("error: nbgrader autograde failed")


def test_a_late_submission_gets_nbgrader_s_timestamp_and_penalty_in_the_real_gradebook(tmp_path):
    """nbgrader's own late-submission rules, applied by the outer grader from the course's files:
    the submission's ``timestamp.txt`` against the due date in the real gradebook, and the
    course's ``LateSubmissionPlugin`` setting ('zero': a late notebook's score is its penalty)."""
    course = make_course(tmp_path / "course", ["00_measure"])
    nbgrader_run.ensure_assignment(course, "00_measure")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.update_or_create_assignment("00_measure", duedate="2026-12-01 12:00:00")
    for student, stamp in [("ontime", "2026-12-01 11:59:00"), ("late", "2026-12-01 13:00:00")]:
        submit(course, student, "00_measure", released("00_measure"))
        (course / "submitted" / student / "00_measure" / "timestamp.txt").write_text(stamp)
    results = [Result("ray-task", 2, 2), Result("batch-model", 2, 2)]
    assert scratch_course.record(course, "00_measure", "ontime", results) == scratch_course.Late(0.0, 0.0)
    assert scratch_course.record(course, "00_measure", "late", results) == scratch_course.Late(3600.0, 0.0)

    with open(course / "nbgrader_config.py", "a") as f:
        f.write("\nc.LateSubmissionPlugin.penalty_method = 'zero'\n")
    assert scratch_course.record(course, "00_measure", "late", results) == scratch_course.Late(3600.0, 4.0)
    assert scratch_course.record(course, "00_measure", "ontime", results) == scratch_course.Late(0.0, 0.0)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        late = gb.find_submission("00_measure", "late")
        assert (late.score, late.late_submission_penalty, late.total_seconds_late) == (4.0, 4.0, 3600.0)
        assert gb.find_submission("00_measure", "ontime").late_submission_penalty == 0.0


def test_what_a_grader_process_would_import_or_replay_is_held_too(course, tmp_path, monkeypatch):
    """Beyond the gradebook and the kit's sources: a module planted in the course folder (first on
    sys.path of a grader run from there), a package or file planted in the kit's folder, a
    compiled file in the kit's ``__pycache__`` (Python runs a ``.pyc`` whose header matches its
    source), a ``.pth`` in site-packages (run by every interpreter at start), a SQLite journal
    next to the gradebook (replayed into it when the grader opens it next), and a folder where a
    held file was. All removed or put back, the submission scores 0, and a grading that raises
    halfway is put back the same way and costs only that submission."""
    kit = tmp_path / "kit"
    (kit / "autograder" / "__pycache__").mkdir(parents=True)
    (kit / "course").mkdir()
    (kit / "autograder" / "session.py").write_text("REAL = True\n")
    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.setattr(nbgrader_run, "KIT_ROOT", kit)
    monkeypatch.setattr(scratch_course, "_site_folders", lambda: [site])
    bob = course / "submitted" / "bob" / "00_measure" / "00_measure.ipynb"
    mine = bob.read_bytes()
    planted = [course / "secrets.py", course / "gradebook.db-journal", kit / "secrets.py",
               kit / "autograder" / "__pycache__" / "session.cpython-311.pyc", site / "evil.pth"]

    def hostile(scratch, assignment, student, limits, **where):
        for p in planted:
            p.write_text("import os")
        (kit / "json").mkdir()
        (kit / "json" / "__init__.py").write_text("planted = True")
        bob.unlink()
        bob.mkdir()  # a folder where a held file was
        return Outcome(student, assignment, [Result("ray-task", 2, 2)])

    monkeypatch.setattr(nbgrader_run, "autograde", hostile)
    outcome = engine.grade_one(course, "bob", "00_measure", scratch_course.template(course), Limits(sandboxed=False))
    assert outcome.score == 0 and "changed the course's or the kit's own files" in outcome.error
    assert not any(p.exists() for p in planted) and not (kit / "json").exists()
    assert bob.read_bytes() == mine and _alice(course) == 2

    def raises(scratch, assignment, student, limits, **where):
        (course / "secrets.py").write_text("import os")
        raise ValueError("Expecting value: line 1 column 2 (char 1)")  # e.g. a broken file the kernel left

    monkeypatch.setattr(nbgrader_run, "autograde", raises)
    outcome = engine.grade_one(course, "bob", "00_measure", scratch_course.template(course), Limits(sandboxed=False))
    assert outcome.error.startswith("the submission changed") and not (course / "secrets.py").exists()
    assert "ValueError" in outcome.log and outcome.results == []


def test_grades_csv_replaces_what_stands_at_its_path_never_writes_through_it(tmp_path):
    book = tmp_path / "gradebook.db"
    book.write_bytes(b"SQLite format 3\0")
    out = tmp_path / "grades.csv"
    out.symlink_to(book)
    cohort.write_csv([Outcome("s1", "00_measure", [Result("a", 2, 2)])], out)
    assert book.read_bytes() == b"SQLite format 3\0" and not out.is_symlink()
    assert list(csv.DictReader(out.open()))[0]["score"] == "2"
    out.unlink()
    out.mkdir()
    cohort.write_csv([], out)
    assert out.is_file() and not list(tmp_path.glob(".grades.csv*"))


def test_a_rerun_grades_only_what_changed_and_an_interrupted_run_continues(tmp_path, monkeypatch, capsys):
    """``grade`` twice: the second run keeps every grade whose submission, kit, limits and seed
    are unchanged (:mod:`autograder.grader.engine.resume`) and grades what changed; ``--regrade``
    grades all; a grading the grader itself could not carry out is retried; Ctrl-C leaves the
    CSV of what was graded, and the next run grades the rest."""
    import csv

    course = make_course(tmp_path / "course", ["00_measure"])
    for student in ("ann", "ben", "cat"):
        submit(course, student, "00_measure", released("00_measure"))
    graded, fail = [], {}

    def fake(course_, student, assignment, gradebook, limits):
        if fail.get(student) == "interrupt":
            raise KeyboardInterrupt
        graded.append(student)
        error = fail.get(student, "")
        return Outcome(student, assignment, [Result("ray-task", 0 if error else 2, 2)], error=error,
                       retry=bool(error))

    monkeypatch.setattr(engine, "grade_one", fake)

    def run(**kw):
        graded.clear()
        code = cohort.run(course, "00_measure", sandboxed=False, **{"cell_timeout_s": 45, **kw})
        with open(course / "grades.csv") as f:
            return code, sorted(graded), {r["student_id"]: r["score"] for r in csv.DictReader(f)}

    fail["ben"] = "the grader could not start its reference process (x); nothing was graded"
    assert run() == (1, ["ann", "ben", "cat"], {"ann": "2", "ben": "0", "cat": "2"})
    fail.clear()
    assert run() == (0, ["ben"], {"ann": "2", "ben": "2", "cat": "2"})  # only the one to retry
    assert "2 unchanged since graded kept their grade" in capsys.readouterr().out
    nb = course / "submitted" / "cat" / "00_measure" / "00_measure.ipynb"
    nb.write_text(nb.read_text().replace("\n", "\n ", 1))  # cat submits again
    assert run()[1] == ["cat"]
    assert run(cell_timeout_s=60)[1] == ["ann", "ben", "cat"]  # other limits: graded again
    assert run(regrade=True)[1] == ["ann", "ben", "cat"]
    for student in ("dan", "eve"):  # new submissions; the run is stopped while dan's grading runs
        submit(course, student, "00_measure", released("00_measure"))
    fail["dan"] = "interrupt"
    assert run() == (130, [], {"ann": "2", "ben": "2", "cat": "2"})
    assert "run the same command again" in capsys.readouterr().err
    fail.clear()
    assert run() == (0, ["dan", "eve"], {s: "2" for s in ("ann", "ben", "cat", "dan", "eve")})


def test_feedback_pages_and_the_cohort_report_say_what_the_grader_found(tmp_path, monkeypatch, capsys):
    """After ``grade``: one feedback page per graded submission with every check's verdict and
    the grader's message (not what the kernel printed), and one cohort report with its figures
    (scores, pass rates, times) and tables (failures by cause, flags and findings, late
    penalties); ``report`` rewrites it from the records alone."""
    from autograder import cli
    from autograder.grader.engine import cohort_report
    from autograder.grader.nbgrading import feedback

    course = make_course(tmp_path / "course", ["00_measure"])
    for student in ("ann", "ben", "cat"):
        submit(course, student, "00_measure", released("00_measure"))
    verdicts = {"ann": [Result("ray-task", 2, 2), Result("batch-model", 2, 2)],
                "ben": [Result("ray-task", 0, 2, "ray_sum(xs) returned 41 for the grader's list; expected 42"),
                        Result("batch-model", 1, 2, "<b>tier 1 only</b>")],
                "cat": [Result("ray-task", 0, 2, "grading failed"), Result("batch-model", 0, 2, "grading failed")]}

    def fake(course_, student, assignment, gradebook, limits):
        more = {"cat": {"error": "the notebook did not finish in 600 s: killed"},
                "ben": {"flags": ["ray-task"], "findings": ["uses os.kill"], "seconds_late": 7200, "late_penalty": 1}}
        return Outcome(student, assignment, verdicts[student], seconds={"ann": 30, "ben": 45, "cat": 600}[student],
                       **more.get(student, {}))

    monkeypatch.setattr(engine, "grade_one", fake)
    assert cohort.run(course, "00_measure", sandboxed=False) == 1
    assert "wrote 3 feedback page(s)" in capsys.readouterr().out
    ben = (course / "feedback" / "ben" / "00_measure" / feedback.NAME).read_text()
    assert "expected 42" in ben and "&lt;b&gt;tier 1 only&lt;/b&gt;" in ben and "<b>tier 1 only</b>" not in ben
    assert "<b>0/4</b> points" in ben and "2.0 h late: 1 point(s) deducted" in ben
    from autograder.grader.session.catalog import descriptions

    assert descriptions("00_measure")["ray-task"]  # from the check's docstring
    assert "measured and passed" in (course / "feedback" / "ann" / "00_measure" / feedback.NAME).read_text()
    report = (course / cohort_report.NAME).read_text()
    assert report.count('src="data:image/png;base64,') == 3  # scores, pass rates, times
    for text in ("3 submission(s)", "ray-task", "batch-model", "33 %", "the notebook did not finish in N s: killed",
                 "<td>ben</td><td>ray-task</td><td>1</td>", "<td>2.0</td><td>1</td>"):
        assert text in report, text
    assert "Graded without the sandbox</b> (learner code ran as the grader's user): ann, ben, cat" in report
    (course / cohort_report.NAME).unlink()
    assert cli.main(["report", str(course)]) == 0  # from the records alone
    again = (course / cohort_report.NAME).read_text()
    assert again == report
