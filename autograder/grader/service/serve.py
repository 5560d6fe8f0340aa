"""``python -m autograder serve COURSE``: grade each submission as it arrives in nbgrader's exchange.

A loop, in one process (the one writer of the gradebook, as in ``grade``):

1. find new submissions in the exchange's inbound folder (:mod:`autograder.grader.nbgrading.exchange`)
   and enter them in the queue (:mod:`autograder.grader.service.submission_queue`), refusing those
   intake turns away (:mod:`autograder.grader.service.intake`) and those over the rate limit;
2. whenever a grading slot is free, claim the next submission in fair order;
3. collect it into ``submitted/`` and grade it exactly as ``grade`` does, through the same
   engine (:mod:`autograder.grader.engine.engine`: here, or the slots of ``--workers``/``--ray``),
   late penalties and all -- each slot takes the next submission as soon as its grading ends;
4. write the kit's feedback page, then nbgrader's (``generate_feedback``) with the grader's
   verdicts at its top, and release it for that student (``release_feedback``);
5. record the result; the student's ``fetch_feedback`` brings the page, and
   ``serve COURSE --status STUDENT`` shows their entries.

The queue is saved after every step, so a killed service, started again, grades what it had
claimed from the start and never grades a finished one again. A submission whose handling
raises costs only that submission: it is recorded as failed, with the reason, and the loop
goes on.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...report import Outcome
from ..nbgrading import course_config, exchange
from ..engine import engine
from . import intake, status_page
from . import submission_queue as sq
from ..errors import SetupError
from ..engine.limits import Limits
from ..isolation.processes import sigterm_as_ctrl_c

DEFAULT_POLL_S = 10.0
ARRIVING_GRACE_S = 600.0  # an inbound folder without nbgrader's secret this long never finished arriving

Release = Callable[[Outcome], str]  # an outcome's feedback handed out; a note for the student ("" when all went well)


@dataclass(frozen=True)
class Options:
    """How the service runs: its limits and pace (its slots are its backend's)."""

    rate: sq.Rate = field(default_factory=sq.Rate)
    max_bytes: float = intake.DEFAULT_MAX_MB * 2**20
    poll_s: float = DEFAULT_POLL_S
    check_owner: bool = True  # as nbgrader's CollectApp.check_owner: the folder's owner must be its student


def log(line: str) -> None:
    """One line of the service's own log (stdout), with the time."""
    print(time.strftime("%Y-%m-%d %H:%M:%S ") + line, flush=True)


class Service:
    """The grading service of one course: its queue on disk, its grading and its feedback."""

    def __init__(self, course: Path, backend: engine.Backend, release: Release, options: Options = Options(),
                 clock: Callable[[], float] = time.time, limits: Limits = Limits()):
        self.course = Path(course).resolve()
        self.where = exchange.place(self.course)
        self.engine = engine.Engine(self.course, backend, limits)
        self.release, self.options, self.clock = release, options, clock
        self.store = sq.Store(self.course)
        book, _ = self.store.load()
        self.book = sq.recover(book)
        self._grading: dict[engine.Job, sq.Entry] = {}
        self._save()

    def _save(self) -> None:
        self.store.save(self.book, {"slots": self.engine.backend.capacity})

    def admit(self) -> int:
        """Enter every new complete submission in the queue; how many were new."""
        complete, arriving = exchange.scan(self.where)
        new = [i for i in complete if i.name not in self.book]
        now = self.clock()
        stale = [i for i in arriving if i.name not in self.book and _age(exchange.folder(self.where, i), now)
                 > ARRIVING_GRACE_S]
        if not new and not stale:
            return 0
        course = intake.roster(self.course)
        for item in new:
            why = self._problem(item, course)
            self.book = sq.admit(self.book, item.name, item.student, item.assignment, item.timestamp, item.when, now,
                                 self.options.rate, why)
            e = self.book[item.name]
            log(f"{e.student} {e.lab} ({e.submitted}): {e.state}" + (f" -- {e.message}" if e.message else ""))
        for item in stale:
            self.book = sq.admit(self.book, item.name, item.student, item.assignment, item.timestamp, item.when, now,
                                 self.options.rate, "your submission never finished arriving (nbgrader's submit did "
                                 "not complete), so it was not graded; submit again")
        self._save()
        return len(new) + len(stale)

    def _problem(self, item: exchange.Inbound, course: intake.Course) -> str | None:
        """Why intake refuses this submission (``None``: it may be graded); never raises."""
        folder = exchange.folder(self.where, item)
        try:
            if self.options.check_owner and (owner := _owner(folder)) not in (item.student, None):
                return (f"this submission names you ({item.student}) but was made by {owner}, so it was not graded; "
                        "your instructor can see it")
            return intake.problem(folder, item.student, item.assignment, course, self.options.max_bytes)
        except OSError as exc:
            return f"your submission could not be read ({type(exc).__name__}: {exc}), so it was not graded"

    def fill(self) -> int:
        """Hand the next submissions, in fair order, to the slots free now; how many started."""
        started = 0
        while True:
            self.book, claimed = sq.claim(self.book, 1, self.clock(), fits=lambda e: self.engine.fits(e.lab))
            if not claimed:
                return started
            e = claimed[0]
            self._save()
            try:
                exchange.collect(self.course, self.where, exchange.parse(e.name))
                job = self.engine.job(e.student, e.lab)
                self._grading[job] = e
                self.engine.start(job)
                started += 1
            except Exception as exc:  # costs only this submission
                self._finish(e, error=f"the submission could not be collected: {type(exc).__name__}: {str(exc)[:200]}")

    def collect_ended(self, timeout_s: float | None) -> int:
        """Take in the gradings that ended, waiting at most ``timeout_s`` for the first; how many."""
        try:
            ended = self.engine.wait(timeout_s)
        except Exception as exc:  # the grading machinery itself: what it did not finish is tried again
            log(f"grading raised {type(exc).__name__}: {exc}")
            for job in self.engine.abandon():
                self._finish(self._grading.pop(job), error=f"grading failed: {type(exc).__name__}: {str(exc)[:200]}",
                             retry=True)
            return 0
        for f in ended:
            self._settle(self._grading.pop(f.job), f.outcome)
        return len(ended)

    def step(self) -> int:
        """Start what the free slots can take, then take in one grading that ends (waiting for
        it while any runs); how many submissions were handled."""
        started = self.fill()
        return started + (self.collect_ended(None) if self.engine.busy() else 0)

    def _settle(self, e: sq.Entry, outcome: Outcome) -> None:
        """Hand out the feedback of one graded submission and record it."""
        note = ""
        if outcome.results and not outcome.retry:
            try:
                note = self.release(outcome)
            except Exception as exc:
                note = f"your grade is in, but its feedback could not be released ({type(exc).__name__}: {str(exc)[:200]})"
        if not outcome.results:
            self._finish(e, error=outcome.error or "the grading produced no verdicts", retry=outcome.retry,
                         seconds=outcome.seconds)
            return
        message = "; ".join(m for m in (f"graded with an error: {outcome.error}" if outcome.error else "",
                                        f"late by {outcome.seconds_late / 3600:.1f} h, {outcome.late_penalty:g} "
                                        "point(s) deducted" if outcome.late_penalty else "", note) if m)
        self._finish(e, score=outcome.score - outcome.late_penalty, max_score=outcome.max_score,
                     seconds=outcome.seconds, message=message)

    def _finish(self, e: sq.Entry, **result) -> None:
        self.book = sq.finish(self.book, e.name, self.clock(), **result)
        done = self.book[e.name]
        log(f"{e.student} {e.lab} ({e.submitted}): {done.state}"
            + (f" {done.score:g}/{done.max_score:g}" if done.score is not None else "")
            + (f" -- {done.message}" if done.message else ""))
        self._save()

    def run(self, once: bool = False) -> int:
        """Admit and grade until stopped (SIGTERM or Ctrl-C); ``once``: until nothing is left."""
        try:
            while True:
                try:
                    self.admit()
                except OSError as exc:  # the exchange unreadable for a moment (a mount, permissions): try again
                    log(f"could not read the exchange: {type(exc).__name__}: {exc}")
                self.fill()
                if self.engine.busy():  # look at the exchange again at least every poll while gradings run
                    self.collect_ended(self.options.poll_s)
                elif once:
                    return 0
                else:
                    time.sleep(self.options.poll_s)
        finally:
            self.engine.close()


def _age(path: Path, now: float) -> float:
    try:
        return now - path.stat().st_mtime
    except OSError:
        return 0.0


def _owner(path: Path) -> str | None:
    """The user name owning ``path`` (``None`` where it has none)."""
    import pwd

    try:
        return pwd.getpwuid(path.stat().st_uid).pw_name
    except KeyError:
        return None


class Lock:
    """One service per course: an exclusive lock on ``COURSE/.autograder/serve/lock`` while it runs."""

    def __init__(self, course: Path):
        self.path = Path(course) / sq.FOLDER / "lock"

    def __enter__(self) -> Lock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(self.path, "a")
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.close()
            raise SetupError(f"another grading service runs for {self.path.parents[2]}") from None
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()


def release_here(course: Path) -> Release:
    """Feedback as a student fetches it: nbgrader's page with the grader's verdicts at its top,
    released for that student (:func:`autograder.grader.nbgrading.exchange.release_feedback`); then the
    kit's own page, ``feedback/<student>/<lab>/grader-feedback.html``, for the instructor, as
    ``grade`` writes it (after: ``generate_feedback --force`` empties that folder)."""
    from ..nbgrading import feedback
    from ..session.catalog import descriptions

    def release(outcome: Outcome) -> str:
        what = descriptions(outcome.assignment)
        exchange.release_feedback(course, outcome.student, outcome.assignment, feedback.section(outcome, what))
        feedback.write(course, outcome, what)
        return ""

    return release


def print_status(course: Path, student: str, as_json: bool = False) -> int:
    """``serve COURSE --status STUDENT``: that student's entries, newest first (exit 0)."""
    import json

    rows = status_page.rows(Path(course), student)
    if as_json:
        print(json.dumps(rows, indent=1))
    elif not rows:
        print(f"no submission of {student} has reached the grading service")
    else:
        for row in rows:
            print(sq.describe(row))
    return 0


def main(course: Path, *, workers: int | None = None, ray_address: str | None = None, once: bool = False,
         sandboxed: bool = True, options: Options = Options(), uncalibrated: bool = False, **limits) -> int:
    """Run the service until stopped (``once``: until nothing is left to grade). ``uncalibrated``:
    as ``grade``'s, side by side where calibrate has not measured the labs' tiers."""
    from ..engine import cohort, resume

    course = Path(course).resolve()
    if not (course / "nbgrader_config.py").exists():
        raise SetupError(f"{course} is not an nbgrader course (no nbgrader_config.py)")
    exchange.place(course)  # a course id, before anything starts
    owner = course_config.settings(course).CollectApp.get("check_owner", True)  # nbgrader's own setting, as collect's
    options = replace(options, check_owner=bool(owner))
    side_by_side = cohort.preflight(set(intake.roster(course).labs), sandboxed, workers, ray_address,
                                     uncalibrated)
    limits = Limits(sandboxed=sandboxed, **limits)
    with Lock(course), sigterm_as_ctrl_c():  # SIGTERM stops the service as Ctrl-C does
        try:
            if status_page.wanted():  # a JupyterHub managed service with a url: the students' page
                status_page.start(course, log)
            if side_by_side:  # the slots of a local Ray, or a cluster's; the template made per grading:
                # it knows labs released since the service started
                backend = engine.Slots(course, limits, resume.kit_fingerprint(), set(intake.roster(course).labs),
                                       workers=workers, address=ray_address, say=log)
            else:
                backend = engine.Here(course, limits)
            service = Service(course, backend, release_here(course), options, limits=limits)
            log(f"serving {service.where.inbound} with {backend.capacity} grading slot(s)"
                + (" (once)" if once else ""))
            return service.run(once)
        except KeyboardInterrupt:
            log("stopped: what was being graded is graded again from the start at the next start")
            return 0
