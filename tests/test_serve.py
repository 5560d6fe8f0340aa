"""The grading service (``python -m autograder serve``): its queue's rules, its restart safety
and its refusals with a stub grading (fast), and once end to end through a real nbgrader
exchange: release, fetch, submit, ``serve --once``, ``fetch_feedback``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from autograder import cli
from autograder.grader.engine import engine
from autograder.grader.nbgrading import exchange
from autograder.grader.service import intake, serve, status_page
from autograder.grader.service import submission_queue as sq
from autograder.grader.engine.limits import Limits
from autograder.report import Outcome, Result
from notebooks import make_course, released, sandboxed

RATE = sq.Rate(5, 24)
LAB = "00_measure"


def _admit(book, student, lab, t, now=None, rate=RATE, problem=None):
    name = f"{student}+{lab}+{t}+x"
    return sq.admit(book, name, student, lab, str(t), float(t), float(now if now is not None else t), rate, problem), name


def test_the_queue_is_round_robin_over_students():
    """ann's three labs arrived first, then ben's and cat's first: ann gets one turn, then
    ben and cat, then ann again; after a turn a student waits behind those already waiting."""
    book = {}
    for t, (student, lab) in enumerate([("ann", "l0"), ("ann", "l1"), ("ann", "l2"), ("ben", "l0"), ("cat", "l0")]):
        book, _ = _admit(book, student, lab, t)
    assert [(e.student, e.lab) for e in sq.order(book)] == [
        ("ann", "l0"), ("ben", "l0"), ("cat", "l0"), ("ann", "l1"), ("ann", "l2")]
    book, first = sq.claim(book, 1, now=10)
    assert [(e.student, e.lab) for e in first] == [("ann", "l0")]
    book, _ = _admit(book, "dan", "l0", 11)  # after ann's turn began: behind ann's next
    assert [e.student for e in sq.order(book)] == ["ben", "cat", "ann", "dan", "ann"]
    book, two = sq.claim(book, 3, now=12)  # one grading per student: ann's next waits for her first
    assert [e.student for e in two] == ["ben", "cat", "dan"]
    book = sq.finish(book, first[0].name, 20, score=1, max_score=2, seconds=8)
    book, more = sq.claim(book, 3, now=21)
    assert [(e.student, e.lab) for e in more] == [("ann", "l1")]


def test_the_latest_submission_counts_and_takes_the_older_ones_place():
    book, old = _admit({}, "ann", LAB, 1)
    book, _ = _admit(book, "ben", LAB, 2)
    book, new = _admit(book, "ann", LAB, 3)
    assert book[old].state == sq.REPLACED and "replaced by your newer submission" in book[old].message
    assert [e.name for e in sq.order(book)][0] == new  # in the place of the one it replaced
    book, stale = _admit(book, "ann", LAB, 0, now=4)  # older than one queued: replaced at once
    assert book[stale].state == sq.REPLACED and "newer submission" in book[stale].message
    book, taken = sq.claim(book, 1, now=5)
    assert taken[0].name == new
    book, newest = _admit(book, "ann", LAB, 6)  # while the older one is graded: queued, and waits for it
    assert book[newest].state == sq.QUEUED and book[new].state == sq.GRADING
    book, next_ = sq.claim(book, 2, now=7)
    assert [e.student for e in next_] == ["ben"]


def test_the_rate_limit_refuses_with_the_time_of_the_next_grading():
    rate = sq.Rate.parse("2/1")
    book = {}
    for t in (0, 100):
        book, name = _admit(book, "ann", LAB, t, rate=rate)
        book, _ = sq.claim(book, 1, now=t)
        book = sq.finish(book, name, t + 50, score=1, max_score=2, seconds=50)
    book, over = _admit(book, "ann", LAB, 200, rate=rate)
    assert book[over].state == sq.REFUSED and "graded 2 times for you in the last 1 h" in book[over].message
    assert "submit again after 1970-01-01 01:00 UTC" in book[over].message
    book, other = _admit(book, "ann", "01_actor_scaling", 201, rate=rate)  # per lab
    assert book[other].state == sq.QUEUED
    book, later = _admit(book, "ann", LAB, 3700, rate=rate)  # the first grading left the window
    assert book[later].state == sq.QUEUED
    book, taken = sq.claim(book, 2, now=3701)
    assert [e.name for e in taken] == [other]  # one grading per student at a time
    retry = sq.finish(book, other, 3702, error="x", retry=True)
    assert retry[other].state == sq.QUEUED and not sq.counts(retry[other])  # the grader's own failure: queued again
    for attempt in (2, 3):  # tried MAX_ATTEMPTS times in all, then failed -- still not the student's grading
        retry, _ = sq.claim(retry, 1, now=3702 + attempt)
        retry = sq.finish(retry, other, 3703 + attempt, error="x", retry=True)
    assert retry[other].state == sq.FAILED and "failed 3 times" in retry[other].message
    assert not sq.counts(retry[other])
    with pytest.raises(ValueError):
        sq.Rate.parse("0/24")


# -- the service, with a stub grading -------------------------------------------------------------------


@pytest.fixture
def course(tmp_path):
    """An nbgrader course with an exchange: labs 00 and 01 released and in its gradebook, a
    roster of ann, ben and cat."""
    course = make_course(tmp_path / "course", [])
    root = tmp_path / "exchange"
    (root / "kit101" / "inbound").mkdir(parents=True)
    with open(course / "nbgrader_config.py", "a") as f:
        f.write(f"\nc.CourseDirectory.course_id = 'kit101'\nc.Exchange.root = {str(root)!r}\n")
    for lab in (LAB, "01_actor_scaling"):
        (course / "labs" / lab).mkdir(parents=True)
        shutil.copy(released(lab), course / "labs" / lab)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.update_or_create_assignment(LAB)
        gb.update_or_create_assignment("01_actor_scaling")
        for student in ("ann", "ben", "cat"):
            gb.update_or_create_student(student)
    return course


def _inbound(course: Path, student: str, lab: str, at: str, notebook: bytes | Path | None = None,
             name: str | None = None, secret: bool = True) -> str:
    """A submission in the exchange as nbgrader's submit leaves it (notebook, timestamp, secret)."""
    stamp = f"2026-05-01 {at}.000000 UTC"
    folder = exchange.place(course).inbound / f"{student}+{lab}+{stamp}+r{at.replace(':', '')}"
    folder.mkdir()
    data = released(lab).read_bytes() if notebook is None else (
        notebook.read_bytes() if isinstance(notebook, Path) else notebook)
    (folder / (name or f"{lab}.ipynb")).write_bytes(data)
    (folder / "timestamp.txt").write_text(stamp)
    if secret:
        (folder / "submission_secret.txt").write_text("s3cret")
    return folder.name


class Stub:
    """A grading backend (:class:`autograder.grader.engine.engine.Backend`, one slot) that records what
    it was asked to grade; it raises ``kill`` (as if the service's process were killed there)
    or an error for the students named."""

    capacity = 1

    def __init__(self, kill: str = "", broken: str = ""):
        self.graded, self.released, self.kill, self.broken = [], [], kill, broken
        self.next = None

    def width(self, lab):
        return 1

    def start(self, job):
        self.next = job

    def wait(self, timeout_s):
        job, self.next = self.next, None
        if job is None:
            return []
        if job.student == self.kill:
            raise KeyboardInterrupt  # not caught by the service: its process ends here
        if job.student == self.broken:
            raise RuntimeError("the grading machinery broke")
        submitted = (Path(self.course) / "submitted" / job.student / job.assignment / f"{job.assignment}.ipynb")
        self.graded.append((job.student, job.assignment, len(submitted.read_bytes())))
        return [engine.Finished(job, Outcome(job.student, job.assignment, [
            Result("ray-task", 2, 2), Result("batch-model", 0, 2, "too slow")], seconds=30))]

    def close(self):
        self.next = None

    def release(self, outcome):
        self.released.append(outcome.student)
        return ""


def _service(course, stub, **options):
    stub.course = course
    return serve.Service(course, stub, stub.release, serve.Options(check_owner=False, **options))


def test_a_killed_service_grades_what_it_had_claimed_again_and_nothing_finished_twice(course):
    """ann's grading finished; the service was killed while ben's ran; cat submitted while it
    was down. Started again: ben's is graded again from the start, cat's is graded, ann's is not."""
    names = {s: _inbound(course, s, LAB, f"10:00:0{k}") for k, s in enumerate(("ann", "ben"))}
    first = Stub(kill="ben")
    with pytest.raises(KeyboardInterrupt):
        _service(course, first).run(once=True)
    assert [g[0] for g in first.graded] == ["ann"] and first.released == ["ann"]
    on_disk, _ = sq.Store(course).load()
    assert on_disk[names["ann"]].state == sq.GRADED and on_disk[names["ben"]].state == sq.GRADING
    _inbound(course, "cat", LAB, "10:05:00")  # during the restart
    again = Stub()
    service = _service(course, again)
    assert "restarted while this was being graded" in service.book[names["ben"]].message
    assert service.run(once=True) == 0
    assert [g[0] for g in again.graded] == ["ben", "cat"]
    book, _ = sq.Store(course).load()
    assert [e.state for e in book.values()] == [sq.GRADED] * 3
    assert book[names["ben"]].attempts == 2 and book[names["ann"]].attempts == 1
    _service(course, again).run(once=True)
    assert len(again.graded) == 2  # a third start grades nothing again


def test_a_grade_written_before_the_service_was_killed_is_taken_from_its_record(course, monkeypatch):
    """The narrow window: the grade is in the gradebook and its record saved, the queue file not
    yet updated. The regrading the restart asks for takes the recorded grade instead."""
    calls = []
    monkeypatch.setattr(engine, "grade_one", lambda c, s, a, gb, lim: calls.append(s) or Outcome(
        s, a, [Result("ray-task", 2, 2)], seconds=5))
    name = _inbound(course, "ann", LAB, "10:00:00")
    exchange.collect(course, exchange.place(course), exchange.parse(name))
    limits = Limits(sandboxed=False)
    grading = engine.Engine(course, engine.Here(course, limits), limits)
    for _ in range(2):
        grading.start(grading.job("ann", LAB))
        assert [f.outcome.score for f in grading.wait()] == [2]
    assert calls == ["ann"]


def test_bad_submissions_get_a_message_and_the_service_keeps_going(course, capsys):
    """Each refused with a message in that student's status, nothing graded for it; a grading
    that raises costs only its own submission; a good one after all of them is graded."""
    inbound = exchange.place(course).inbound
    bad = {
        "not a notebook": _inbound(course, "ann", LAB, "09:00:00", b"this is my essay, not a notebook"),
        "wrong lab": _inbound(course, "ben", LAB, "09:00:01", released("01_actor_scaling")),
        "huge": _inbound(course, "cat", LAB, "09:00:02"),
        "not on the roster": _inbound(course, "mallory", LAB, "09:00:03"),
        "no notebook": _inbound(course, "ann", "01_actor_scaling", "09:00:04", name="answers.txt"),
        "unknown lab": _inbound(course, "ben", "99_nope", "09:00:05", released(LAB), name="99_nope.ipynb"),
    }
    with open(inbound / bad["huge"] / "big.bin", "wb") as f:  # 60 MB, sparse: nothing written
        f.truncate(60 * 2**20)
    bad["a link"] = _inbound(course, "cat", "01_actor_scaling", "09:00:07", b"{}", name="notes.txt")
    (inbound / bad["a link"] / "01_actor_scaling.ipynb").symlink_to(course / "gradebook.db")
    arriving = _inbound(course, "cat", "01_actor_scaling", "09:00:06", secret=False)
    stub = Stub(broken="ann")
    service = _service(course, stub)
    service.run(once=True)
    book = service.book
    assert arriving not in book  # still arriving: looked at again next time
    expected = {"not a notebook": "your 00_measure.ipynb is not a readable notebook (JSONDecodeError",
                "wrong lab": "holds none of lab 00_measure's cells (it looks like lab 01_actor_scaling's notebook)",
                "huge": "your submission is 60 MB, over this course's limit of 50 MB",
                "not on the roster": "you (mallory) are not on this course's roster",
                "no notebook": "has no 01_actor_scaling.ipynb (it holds: answers.txt)",
                "unknown lab": "this course has no lab '99_nope'",
                "a link": "holds a link or special file (01_actor_scaling.ipynb)"}
    for what, name in bad.items():
        assert book[name].state == sq.REFUSED and expected[what] in book[name].message, (what, book[name].message)
        assert "not graded" in book[name].message
    assert stub.graded == []
    good = _inbound(course, "ann", LAB, "09:10:00")
    fine = _inbound(course, "ben", LAB, "09:10:01")
    service.run(once=True)
    assert service.book[good].state == sq.FAILED and service.book[good].attempts == sq.MAX_ATTEMPTS
    assert "the grader failed 3 times to grade this submission" in service.book[good].message
    assert service.book[fine].state == sq.GRADED and stub.graded == [("ben", LAB, len(released(LAB).read_bytes()))]
    os.utime(inbound / arriving, (0, 0))  # never finished arriving
    service.admit()
    assert service.book[arriving].state == sq.REFUSED and "never finished arriving" in service.book[arriving].message
    capsys.readouterr()
    assert cli.main(["serve", str(course), "--status", "ann"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{LAB} submitted 2026-05-01 09:10:00.000000 UTC: failed -- the grader failed"), out
    assert out[1].startswith("01_actor_scaling submitted 2026-05-01 09:00:04.000000 UTC: refused -- your "
                             "submission has no 01_actor_scaling.ipynb"), out
    later = _inbound(course, "ann", LAB, "09:30:00")
    service.admit()
    capsys.readouterr()
    assert cli.main(["serve", str(course), "--status", "ann"]) == 0
    assert capsys.readouterr().out.startswith(f"{LAB} submitted 2026-05-01 09:30:00.000000 UTC: queued, number 1 "
                                              "in the queue, estimated wait about 1 min")
    assert service.book[later].state == sq.QUEUED
    assert any("01_actor_scaling" in line and "refused" in line for line in out)
    owned = serve.Service(course, stub, stub.release, serve.Options(check_owner=True))
    spoof = _inbound(course, "cat", LAB, "09:20:00")  # made by this test's user, in cat's name
    owned.admit()
    assert owned.book[spoof].state == sq.REFUSED and "names you (cat) but was made by" in owned.book[spoof].message


def test_status_shows_the_place_and_the_wait_from_recent_gradings(course, capsys):
    book = {}
    for t, student in enumerate(["ann", "ben", "cat", "dan"]):
        book, _ = _admit(book, student, LAB, t)
    book, taken = sq.claim(book, 1, now=10)
    book = sq.finish(book, taken[0].name, 70, score=2, max_score=4, seconds=60)
    rows = sq.status(book, "dan", slots=2, now=70)
    assert rows[0]["position"] == 3 and rows[0]["wait_s"] == 120  # after ben's or cat's, 60 s each
    assert sq.describe(sq.status(book, "ann")[0]).endswith("graded, 2/4; fetch your feedback")
    sq.Store(course).save(book, {"slots": 2})
    assert cli.main(["serve", str(course), "--status", "dan", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["wait_s"] == 120
    assert cli.main(["serve", str(course), "--status", "nobody"]) == 0
    assert "no submission of nobody" in capsys.readouterr().out


def test_collect_takes_the_claimed_submission_and_feedback_goes_in_nbgrader_s_page(course):
    """Not the student's latest (nbgrader collect's choice) but the one claimed; the grader's
    section is put in nbgrader's page once, however often it is put."""
    where = exchange.place(course)
    old = _inbound(course, "ann", LAB, "10:00:00", b'{"cells": []}')
    _inbound(course, "ann", LAB, "10:00:01")
    (where.inbound / old / "other.ipynb").symlink_to(course / "gradebook.db")  # put there after intake
    dest = exchange.collect(course, where, exchange.parse(old))
    assert (dest / f"{LAB}.ipynb").read_bytes() == b'{"cells": []}' and (dest / "submission_secret.txt").exists()
    assert (dest / "other.ipynb").is_symlink()  # copied as a link, never followed: the scratch course drops it
    item = exchange.parse("a+b+c+d+2026-05-01 10:00:00 UTC+xyz")
    assert (item.student, item.assignment) == ("a+b+c", "d")
    page = exchange.with_section(exchange.with_section("<html><body class=x><p>nb</p></body>", "ONE"), "TWO")
    assert page.count("TWO") == 1 and "ONE" not in page and page.index("TWO") < page.index("<p>nb")


# -- end to end through nbgrader's exchange ---------------------------------------------------------------


def _nbgrader(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=300)
    assert not check or proc.returncode == 0, proc.stderr[-2000:]
    return proc


@pytest.mark.slow
@pytest.mark.grading
def test_submit_serve_once_and_fetch_feedback_through_a_real_exchange(tmp_path):
    """The instructor releases lab 00 (nbgrader's release_assignment); ann and bob fetch it and
    submit with nbgrader's submit -- ann the blank lab, bob a file that is not a notebook under
    the lab's name. ``serve --once`` grades ann's (0 points, every check's verdict) and refuses
    bob's; ann's ``fetch_feedback`` brings nbgrader's page with the grader's verdicts in it, and
    each student's status says what happened."""
    began = time.monotonic()
    course = make_course(tmp_path / "course", [LAB])
    root = tmp_path / "exchange"
    root.mkdir()
    root.chmod(0o777)
    common = [f"--Exchange.root={root}", "--course=kit101"]
    with open(course / "nbgrader_config.py", "a") as f:
        f.write(f"\nc.CourseDirectory.course_id = 'kit101'\nc.Exchange.root = {str(root)!r}\n"
                "c.CollectApp.check_owner = False  # the test's students are not Unix users\n")
    _nbgrader(["generate_assignment", LAB], course)
    _nbgrader(["db", "student", "add", "ann"], course)
    _nbgrader(["db", "student", "add", "bob"], course)
    _nbgrader(["release_assignment", LAB], course)
    for student in ("ann", "bob"):
        home = tmp_path / student
        home.mkdir()
        mine = [*common, f"--Exchange.cache={home / '.cache'}", f"--student={student}"]
        _nbgrader(["fetch_assignment", LAB, *mine], home)
        if student == "bob":
            (home / LAB / f"{LAB}.ipynb").write_text("my answers, typed in a text editor")
        _nbgrader(["submit", LAB, *mine], home)
    argv = ["serve", str(course), "--once"] + ([] if sandboxed() else ["--unsandboxed"])
    served = time.monotonic()
    assert cli.main(argv) == 0
    seconds = time.monotonic() - served
    book, _ = sq.Store(course).load()
    by = {e.student: e for e in book.values()}
    assert by["ann"].state == sq.GRADED and by["ann"].score == 0 and by["ann"].max_score > 0, by["ann"]
    assert by["bob"].state == sq.REFUSED and "is not a readable notebook" in by["bob"].message
    home = tmp_path / "ann"
    _nbgrader(["fetch_feedback", LAB, *common, f"--Exchange.cache={home / '.cache'}", "--student=ann"], home)
    pages = list((home / LAB / "feedback").glob(f"*/{LAB}.html"))
    assert len(pages) == 1, list((home / LAB).rglob("*"))
    page = pages[0].read_text()
    assert 'id=autograder-feedback' in page and "Feedback for <b>ann</b>: <b>0/" in page and "ray-task" in page
    assert (course / "feedback" / "ann" / LAB / "grader-feedback.html").exists()
    bob = tmp_path / "bob"
    _nbgrader(["fetch_feedback", LAB, *common, f"--Exchange.cache={bob / '.cache'}", "--student=bob"], bob)
    assert not list((bob / LAB).glob("feedback/*/*.html"))
    print(f"\nserve --once: {seconds:.0f} s (ann graded in {by['ann'].seconds:.0f} s); "
          f"whole test {time.monotonic() - began:.0f} s")


def test_another_labs_notebook_is_refused_when_only_this_lab_is_released(tmp_path):
    """Seen through the hub: a course that has released only lab 00 took lab 01's notebook for
    lab 00's (they share the locked cells) and graded it 0 with an nbgrader error. The kit's own
    labs tell them apart."""
    course = make_course(tmp_path / "course", [])
    (course / "labs" / LAB).mkdir(parents=True)
    shutil.copy(released(LAB), course / "labs" / LAB)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.update_or_create_assignment(LAB)
        gb.update_or_create_student("ann")
    folder = tmp_path / "submission"
    folder.mkdir()
    shutil.copy(released("01_actor_scaling"), folder / f"{LAB}.ipynb")
    why = intake.problem(folder, "ann", LAB, intake.roster(course), 50 * 2**20)
    assert why and "holds none of lab 00_measure's cells (it looks like lab 01_actor_scaling's notebook)" in why, why
    shutil.copy(released(LAB), folder / f"{LAB}.ipynb")
    assert intake.problem(folder, "ann", LAB, intake.roster(course), 50 * 2**20) is None


def test_a_submission_arriving_during_a_grading_round_is_shown_before_it_is_taken_in(course, capsys):
    """Seen through the hub: the service takes new submissions in only as a grading ends, so a
    student who submitted during a round saw nothing on their page for up to a minute. Now it is
    there at once, placed after everything already waiting."""
    _inbound(course, "ben", LAB, "10:00:00")
    service = _service(course, Stub())
    service.admit()
    _inbound(course, "ann", LAB, "10:00:05")  # while ben's round runs: not taken in yet
    rows = status_page.rows(course, "ann")
    assert rows[0]["state"] == sq.ARRIVED and rows[0]["position"] == 2 and rows[0]["wait_s"] is None, rows
    assert "number 2 in the queue" in sq.describe(rows[0]) and "arrived while the service was grading" in sq.describe(
        rows[0])
    service.run(once=True)
    assert [r["state"] for r in status_page.rows(course, "ann")] == [sq.GRADED]
    assert cli.main(["serve", str(course), "--status", "ann"]) == 0
    assert "graded, 2/4" in capsys.readouterr().out


def test_the_wait_is_played_forward_per_lab_on_slots_that_take_the_next_at_once():
    """Two slots, no rounds: a lab 01 grading took 50 s, a lab 00 one 15 s. Queued next: cat
    (lab 00), dan (lab 01), eve (lab 00). cat's ends at 15 s and eve takes that slot at once,
    ending at 30 s -- not after dan's 50 s, as rounds that waited for their slowest grading had it."""
    book = {}
    for t, (student, lab) in enumerate([("ann", "01_actor_scaling"), ("ben", LAB)]):
        book, _ = _admit(book, student, lab, t)
    book, pair = sq.claim(book, 2, now=10)
    book = sq.finish(book, pair[0].name, 60, score=4, max_score=4, seconds=50)
    book = sq.finish(book, pair[1].name, 25, score=0, max_score=4, seconds=15)
    for t, (student, lab) in enumerate([("cat", LAB), ("dan", "01_actor_scaling"), ("eve", LAB)], 100):
        book, _ = _admit(book, student, lab, t)
    assert sq.lab_seconds(book) == {"01_actor_scaling": 50, LAB: 15}
    waits = {s: sq.status(book, s, slots=2, now=200)[0]["wait_s"] for s in ("cat", "dan", "eve")}
    assert waits == {"cat": 15, "dan": 50, "eve": 30}
    book, taken = sq.claim(book, 1, now=200)  # cat's grading started 5 s ago: 10 s left, then eve's 15
    assert sq.status(book, "eve", slots=2, now=205)[0]["wait_s"] == 25
    # before the service has graded a lab: the course's recorded gradings, or any lab's median
    assert sq.lab_seconds({}, {"02_restart_recovery": [80.0, 100.0, 90.0]}) == {"02_restart_recovery": 90}
    fresh, _ = _admit({}, "fay", "02_restart_recovery", 0)
    assert sq.status(fresh, "fay", now=0)[0]["wait_s"] is None  # nothing known at all: "unknown yet"
    assert sq.status(fresh, "fay", now=0, seconds={LAB: 40})[0]["wait_s"] == 40


def test_a_slot_that_frees_takes_the_next_submission_while_the_other_still_grades(course):
    """Two slots, the service's own loop: ann's grading is long, ben's short; cat's submission
    starts in ben's slot as soon as ben's ends, while ann's still runs (no rounds)."""
    class Two(Stub):
        capacity = 2

        def __init__(self):
            super().__init__()
            self.running, self.log = [], []

        def start(self, job):
            self.running.append(job)
            self.log.append(("start", job.student, tuple(j.student for j in self.running)))

        def wait(self, timeout_s):
            # ann's ends last: the others end first, one per wait
            job = next((j for j in self.running if j.student != "ann"), None) or self.running[0]
            self.running.remove(job)
            self.log.append(("end", job.student))
            self.graded.append((job.student, job.assignment, 0))
            return [engine.Finished(job, Outcome(job.student, job.assignment, [Result("ray-task", 2, 2)], seconds=5))]

    for k, s in enumerate(("ann", "ben", "cat")):
        _inbound(course, s, LAB, f"10:00:0{k}")
    two = Two()
    assert _service(course, two).run(once=True) == 0
    assert two.log[:4] == [("start", "ann", ("ann",)), ("start", "ben", ("ann", "ben")), ("end", "ben"),
                           ("start", "cat", ("ann", "cat"))], two.log
    book, service = sq.Store(course).load()
    assert [e.state for e in book.values()] == [sq.GRADED] * 3 and service["slots"] == 2


def _same(o: Outcome) -> dict:
    """What must not depend on the path a submission took: each check's score (messages of timed
    checks say what was measured, which differs run to run), and the outcome's typed fields."""
    return {"results": [(r.name, r.score, r.max_score, r.skipped) for r in o.results], "error": o.error,
            "retry": o.retry, "flags": o.flags, "findings": o.findings, "cell_errors": o.cell_errors,
            "sandboxed": o.sandboxed}


@pytest.mark.slow
@pytest.mark.grading
def test_check_grade_grade_with_workers_and_serve_give_one_submission_the_same_outcome(tmp_path):
    """One grading path (issue 53): ann's lab 00 -- the solution's ``throughput`` and
    ``submit_batch``, ``best_batch_size`` left blank, so some checks pass and some fail without a
    timed tier in play -- graded by ``check``, by ``grade`` one at a time, by ``grade --workers 2``
    and by ``serve --once``: the same outcome each way."""
    from autograder import selfcheck
    from autograder.grader.engine import cohort_report
    from notebooks import answer_cells, variant

    blank = answer_cells(released(LAB))
    nb = variant(LAB, tmp_path / "ann.ipynb", demos=False, replace={"best_batch_size": blank["best_batch_size"]})
    unsandboxed = [] if sandboxed() else ["--unsandboxed"]
    began = time.monotonic()
    seen = {"check": selfcheck.grade_notebook(nb, LAB, sandboxed=sandboxed())}
    course = make_course(tmp_path / "course", [LAB])
    (tmp_path / "exchange" / "kit101" / "inbound").mkdir(parents=True)
    with open(course / "nbgrader_config.py", "a") as f:
        f.write(f"\nc.CourseDirectory.course_id = 'kit101'\nc.Exchange.root = {str(tmp_path / 'exchange')!r}\n"
                "c.CollectApp.check_owner = False  # the test's students are not Unix users\n")
    _nbgrader(["generate_assignment", LAB], course)
    _nbgrader(["db", "student", "add", "ann"], course)
    _inbound(course, "ann", LAB, "10:00:00", nb)
    assert cli.main(["serve", str(course), "--once", *unsandboxed]) == 0
    (seen["serve"],) = cohort_report.recorded(course)
    assert cli.main(["grade", str(course), LAB, "--regrade", *unsandboxed]) == 0
    (seen["grade"],) = cohort_report.recorded(course)
    if sandboxed():  # side by side needs the sandbox
        assert cli.main(["grade", str(course), LAB, "--regrade", "--workers", "2", "--uncalibrated"]) == 0
        (seen["grade --workers 2"],) = cohort_report.recorded(course)
    first = _same(seen["check"])
    assert 0 < sum(r[1] for r in first["results"]) < sum(r[2] for r in first["results"]), first
    for how, outcome in seen.items():
        assert _same(outcome) == first, how
    print(f"\none submission four ways: {time.monotonic() - began:.0f} s")
