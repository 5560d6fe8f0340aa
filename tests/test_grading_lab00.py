"""A cohort of lab 00 submissions graded by real `nbgrader autograde` through
`python -m autograder grade`: each broken or hostile submission loses only the points it did
not earn, with a reason, and nobody else's grade is touched."""

from __future__ import annotations

import csv
import re
import sqlite3

import pytest

from autograder import cli

from autograder.grader import cohort, nbgrader_run
from notebooks import make_course, released, sandboxed, submit, variant

pytestmark = [pytest.mark.timeout(1800), pytest.mark.grading]  # the module fixture grades six submissions

LAB = "00_measure"
SEED = "12345"
BLANK = {c.metadata["nbgrader"]["grade_id"]: c.source
         for c in __import__("nbformat").read(released(LAB), as_version=4).cells
         if c.metadata.get("nbgrader", {}).get("solution")}

MEMORY_LIMIT_GIB = 4  # lab 00's kernel with its own Ray uses well under 2 GiB
SHUTDOWN = "import ray\nray.shutdown()"  # learners do, to "clean up"
THROUGHPUT_CHECKS = {"throughput-known-cost", "throughput-sync", "throughput-warmup", "throughput-outliers"}
BATCH_CHECKS = {"batch-model", "batch-real-tier1", "batch-real-tier2"}


def _submissions(tmp):
    return {
        "alice-solution": variant(LAB, tmp / "a.ipynb"),
        # grows its memory past the cohort's cap in a cell of its own; the next student is graded normally
        "carl-memory-bomb": variant(LAB, tmp / "c.ipynb", base=released(LAB), demos=False, after={"setup": [
            "import time\nhoard = []\nfor _ in range(400):\n    hoard.append(bytearray(64 * 2**20))\n"
            "    time.sleep(0.02)"]}),
        "dave-hangs": variant(LAB, tmp / "d.ipynb", demos=False, replace={
            "throughput": "def throughput(fn, items):\n    while True:\n        pass",
            "best_batch_size": BLANK["best_batch_size"]},  # left blank: the hangs are what is graded
            # a demonstration cell calls the hanging function before any graded cell does
            after={"throughput": ["rate = throughput(lambda: None, 1)"], "submit_batch": ["while True:\n    pass"]}),
        # tries to exit, writes to fd 2, and shuts Ray down before every graded cell
        "erin-exits": variant(LAB, tmp / "e.ipynb", demos=False, after={
            "throughput": ["exit()", "import os\nos._exit(0)", "import sys\nsys.exit(3)", SHUTDOWN],
            **{gid: [SHUTDOWN] for gid in ("test-throughput-known-cost", "test-throughput-sync",
                                           "test-throughput-warmup", "best_batch_size", "test-batch-model",
                                           "test-batch-real-tier1", "submit_batch")},
            # noise written to file descriptor 2 from a background thread, as Ray's C++ core does
            "setup": ["import os, threading, time as _t\n"
                      "def _noise():\n"
                      "    while True:\n"
                      "        os.write(2, b'[raylet] simulated core warning\\n')\n"
                      "        _t.sleep(0.5)\n"
                      "threading.Thread(target=_noise, daemon=True).start()"]}),
        # zeroes every grade in the gradebook it grades in (a scratch copy), then hunts the disk
        # for the course's real one (any other gradebook next to a submission of its own); the
        # blank's code otherwise (what it earns is not what is tested: alice's grade is)
        "ivan-gradebook": variant(LAB, tmp / "i.ipynb", base=released(LAB), demos=False, after={"setup": [
            "import os, pathlib, sqlite3\n"
            "here = pathlib.Path.cwd()\n"
            "mine = next(p / 'gradebook.db' for p in here.parents if (p / 'gradebook.db').exists())\n"
            "found = [pathlib.Path(d) / 'gradebook.db' for d, _, files in os.walk('/tmp') if 'gradebook.db' in files\n"
            "         and (pathlib.Path(d) / 'submitted' / 'ivan-gradebook').is_dir()]\n"
            "for db in [mine] + [f for f in found if f != mine]:\n"
            "    with sqlite3.connect(db) as con:\n"
            "        con.execute('update grade set auto_score = 0')"]}),
        "judy-kills-kernel": variant(LAB, tmp / "j.ipynb", demos=False, after={"throughput": [
            "import ctypes\nlibc = ctypes.CDLL(None)\nlibc.kill(libc.getpid(), 9)"]}),
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cohort")
    course = make_course(tmp / "course", [LAB])
    for student, nb in _submissions(tmp).items():
        submit(course, student, LAB, nb)
    mp = pytest.MonkeyPatch()
    mp.setenv("AUTOGRADER_SEED", SEED)             # deterministic workloads, so fakes can be checked
    mp.setenv("AUTOGRADER_CALL_TIMEOUT_S", "20")   # a hang costs 20 s, not 60
    code = cohort.run(course, LAB, cell_timeout_s=45, timeout_s=600, memory_limit_gib=MEMORY_LIMIT_GIB,
                      sandboxed=sandboxed())
    mp.undo()
    with open(course / "grades.csv") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    return code, rows, course


@pytest.mark.slow
def test_a_second_run_keeps_every_grade_and_grades_nothing_again(graded, monkeypatch):
    code, rows, course = graded
    monkeypatch.setenv("AUTOGRADER_SEED", SEED)
    monkeypatch.setenv("AUTOGRADER_CALL_TIMEOUT_S", "20")
    monkeypatch.setattr(cohort, "grade_one", lambda *a, **k: pytest.fail(f"graded again: {a[1]}"))
    again = cohort.run(course, LAB, cell_timeout_s=45, timeout_s=600, memory_limit_gib=MEMORY_LIMIT_GIB,
                       sandboxed=sandboxed())
    with open(course / "grades.csv") as f:
        assert again == code and {r["student_id"]: r for r in csv.DictReader(f)} == rows


def failed(row):
    return set(row["failed_checks"].split())


@pytest.mark.slow
def test_exit_code_reports_the_submission_that_could_not_be_graded(graded):
    code, rows, _ = graded
    assert code == 1
    assert sorted(rows) == sorted(["alice-solution", "carl-memory-bomb", "dave-hangs", "erin-exits",
                                   "ivan-gradebook", "judy-kills-kernel"])


@pytest.mark.slow
def test_solution(graded):  # the blank lab 00: test_nbgrader_run (graded through the venv's python)
    _, rows, course = graded
    assert (rows["alice-solution"]["score"], rows["alice-solution"]["max_score"]) == ("14", "14")
    assert rows["alice-solution"]["status"] == "graded"
    assert {r["sandbox"] for r in rows.values()} == {"bubblewrap" if sandboxed() else "none"}
    # the lesson's demonstrations (graded with the solution) run as written
    assert nbgrader_run.cell_errors(course / "autograded" / "alice-solution" / LAB) == []


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
            "join submitted_assignment sa on sn.assignment_id = sa.id where sa.student_id = 'alice-solution'"
        ).fetchone()[0]
    assert alice == 14


@pytest.mark.slow
def test_killed_kernel_is_recorded_and_grading_goes_on(graded):
    _, rows, _ = graded
    row = rows["judy-kills-kernel"]
    assert row["status"].startswith("error:") and "kernel died" in row["status"] and row["score"] == "0"
    others = [r["status"] for s, r in rows.items() if s not in ("judy-kills-kernel", "ivan-gradebook", "carl-memory-bomb")]
    assert others == ["graded"] * 3


@pytest.mark.slow
def test_every_student_gets_feedback_and_the_instructor_a_cohort_report(graded):
    """The cohort run's feedback pages carry every check and the grader's own message for each
    failure (dave's hangs: the call deadline); the report has its figures and each check."""
    from autograder.grader import cohort_report, feedback
    from autograder.grader.catalog import for_lab

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
