"""The grading service's queue: fair across students, latest submission counts, rate-limited,
and kept on disk so that a killed service resumes where it stopped.

Every submission the service has seen is one :class:`Entry`, keyed by its inbound folder's
name (unique per ``nbgrader submit``), in one JSON file, ``COURSE/.autograder/serve/state.json``,
replaced atomically after every change (:class:`Store`). An entry moves

    queued -> grading -> graded | failed        (or back to queued: see below)
    queued -> replaced                          (a newer submission of the same lab arrived)
    refused                                     (intake said why, or the rate limit)

Rules, each a pure function of the entries and the time, so tests need no grading:

* **Fair order** (:func:`order`): round-robin over students. Each student holds one place in
  line, the time their oldest queued entry arrived, but never earlier than the start of their
  last grading: after a turn a student goes behind everyone who was waiting, so one student's
  resubmissions never starve another's first. At most one grading per student at a time.
* **Latest counts** (:func:`admit`): a newer submission of a student's lab replaces a queued
  older one and takes its place in line; one older than a submission already queued, grading or
  graded is replaced at once. nbgrader's own timestamps decide which is newer.
* **Rate limit** (:class:`Rate`): at most N gradings per student per lab in any H hours; a
  submission over it is refused with the time the next one may be graded.
* **Restart safety** (:func:`recover`): an entry found ``grading`` at start was claimed and not
  finished: it is queued again and graded from the start. A ``graded`` entry is never claimed
  again. (The narrow window between a grade written and this file updated is closed by the
  grade's own record, :mod:`autograder.grader.engine.resume`, which the service reads first.)
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path


QUEUED, GRADING, GRADED, FAILED, REPLACED, REFUSED = "queued", "grading", "graded", "failed", "replaced", "refused"
FOLDER = ".autograder/serve"
ARRIVED = "arrived"  # in the exchange, not yet taken in: the service takes new ones in as a grading ends
MAX_ATTEMPTS = 3  # a grading the grader itself could not carry out is tried again, this often in all
RECENT = 20  # gradings whose times estimate the wait


@dataclass(frozen=True)
class Entry:
    """One submission as the service knows it (plain data: a web page can show it as is)."""

    name: str  # the inbound folder: {student}+{lab}+{timestamp}+{random}
    student: str
    lab: str
    submitted: str  # nbgrader's timestamp, as written
    when: float  # the same, in seconds since the epoch (orders a student's submissions)
    seen: float  # when the service found it
    place: float  # its place in line (seen, or the place of the entry it replaced)
    state: str = QUEUED
    message: str = ""
    grader_fault: bool = False  # the last try failed for the grader's own reasons, not the submission's
    attempts: int = 0
    started: float = 0.0
    finished: float = 0.0
    seconds: float = 0.0  # the grading's own time
    score: float | None = None
    max_score: float | None = None


@dataclass(frozen=True)
class Rate:
    """At most ``count`` gradings of one student's lab in any ``hours``."""

    count: int = 5
    hours: float = 24.0

    @classmethod
    def parse(cls, text: str) -> Rate:
        """``N/HOURS``, e.g. ``5/24``."""
        count, _, hours = text.partition("/")
        rate = cls(int(count), float(hours or 1))
        if rate.count < 1 or rate.hours <= 0:
            raise ValueError(f"a rate of at least 1 per a positive number of hours, not {text!r}")
        return rate


Book = dict[str, Entry]


def admit(book: Book, name: str, student: str, lab: str, submitted: str, when: float, now: float,
          rate: Rate, problem: str | None = None) -> Book:
    """The book with one newly found submission entered: refused (``problem``, or over the
    rate), replaced by a newer one, or queued -- replacing an older queued one of the lab."""
    if name in book:
        return book
    new = Entry(name, student, lab, submitted, when, seen=now, place=now)
    out = dict(book)
    if problem:
        out[name] = replace(new, state=REFUSED, message=problem)
        return out
    same = [e for e in book.values() if (e.student, e.lab) == (student, lab)]
    newer = [e for e in same if e.state in (QUEUED, GRADING, GRADED) and (e.when, e.name) > (when, name)]
    if newer:
        out[name] = replace(new, state=REPLACED, message=f"your newer submission of {newer[0].submitted} counts instead")
        return out
    older = [e for e in same if e.state == QUEUED]
    for e in older:
        out[e.name] = replace(e, state=REPLACED, message=f"replaced by your newer submission of {submitted}")
        new = replace(new, place=min(new.place, e.place))
    if not older:
        used = [e.started for e in same if counts(e) and e.started > now - rate.hours * 3600]
        if len(used) >= rate.count:
            again = min(used) + rate.hours * 3600
            out[name] = replace(new, state=REFUSED, message=(
                f"this lab was graded {len(used)} times for you in the last {rate.hours:g} h, this course's limit, so "
                f"this submission was not graded; submit again after {_clock(again)}"))
            return out
    out[name] = new
    return out


def counts(e: Entry) -> bool:
    """Whether an entry used one of its student's gradings (a grading the grader itself could
    not carry out does not)."""
    return e.state in (GRADING, GRADED) or (e.state == FAILED and not e.grader_fault)


def _clock(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))


def order(book: Book) -> list[Entry]:
    """The queued entries in the order they will be graded (round-robin over students)."""
    queues: dict[str, list[Entry]] = {}
    for e in sorted((e for e in book.values() if e.state == QUEUED), key=lambda e: (e.place, e.name)):
        queues.setdefault(e.student, []).append(e)
    last = {}
    for e in book.values():
        if e.started:
            last[e.student] = max(last.get(e.student, 0.0), e.started)
    tickets = {s: max(q[0].place, last.get(s, 0.0)) for s, q in queues.items()}
    clock = max(tickets.values(), default=0.0)
    out = []
    while queues:
        student = min(tickets, key=lambda s: (tickets[s], s))
        out.append(queues[student].pop(0))
        clock += 1.0  # behind everyone now in line
        if queues[student]:
            tickets[student] = clock
        else:
            del queues[student], tickets[student]
    return out


def claim(book: Book, n: int, now: float, fits=None) -> tuple[Book, list[Entry]]:
    """Up to ``n`` entries to grade now, in fair order, at most one per student (and none of a
    student who is being graded); the book with them marked ``grading``. ``fits(entry)``: whether
    there is room for that entry's grading now (a lab that takes several slots); the first that
    does not fit stops the claim, so no later entry overtakes it."""
    busy = {e.student for e in book.values() if e.state == GRADING}
    out, taken = dict(book), []
    for e in order(book):
        if len(taken) >= n:
            break
        if e.student in busy:
            continue
        if fits is not None and not fits(e):
            break
        busy.add(e.student)
        e = replace(e, state=GRADING, started=now, attempts=e.attempts + 1, message="")
        out[e.name] = e
        taken.append(e)
    return out, taken


def finish(book: Book, name: str, now: float, *, score: float | None = None, max_score: float | None = None,
           seconds: float = 0.0, error: str = "", retry: bool = False, message: str = "") -> Book:
    """The book with one grading finished: graded (``error`` empty), failed, or -- a grading the
    grader itself could not carry out (``retry``), tried fewer than :data:`MAX_ATTEMPTS` times --
    queued again. A grader's failure never counts against the student's gradings (:func:`counts`)."""
    e = book[name]
    out = dict(book)
    if retry and e.attempts < MAX_ATTEMPTS:
        out[name] = replace(e, state=QUEUED, grader_fault=True,
                            message=f"the grader could not grade it this time ({error[:200]}); it is queued again")
        return out
    if retry:
        error = (f"the grader failed {e.attempts} times to grade this submission ({error}); it was not graded: "
                 "tell your instructor")
    out[name] = replace(e, state=FAILED if (error or retry) and score is None else GRADED, finished=now,
                        seconds=seconds, score=score, max_score=max_score, message=message or error,
                        grader_fault=retry)
    return out


def recover(book: Book) -> Book:
    """The book as a restarted service takes it: what was being graded is queued again, in its place."""
    return {k: (replace(e, state=QUEUED, message="the grading service restarted while this was being graded; "
                                                 "it is graded again from the start")
                if e.state == GRADING else e) for k, e in book.items()}


def lab_seconds(book: Book, earlier: dict[str, list[float]] | None = None) -> dict[str, float]:
    """Per lab, how long one grading takes: the median of its :data:`RECENT` latest gradings by
    this service, or, before its first, of ``earlier`` ones (the course's recorded gradings,
    :func:`autograder.grader.engine.resume.seconds_by_lab`). Labs differ several-fold (a blank lab 00 in
    seconds, a lab 01 solution in minutes), so one figure for all misleads every student."""
    done: dict[str, list[tuple[float, float]]] = {}
    for e in book.values():
        if e.state == GRADED and e.seconds > 0:
            done.setdefault(e.lab, []).append((e.finished, e.seconds))
    out = {lab: statistics.fmean(s for _, s in sorted(times)[-RECENT:]) for lab, times in done.items()}
    for lab, seconds in (earlier or {}).items():
        if lab not in out and seconds:
            out[lab] = statistics.fmean(seconds[-RECENT:])
    return out


def waits(book: Book, slots: int, now: float, seconds: dict[str, float],
          later: list[tuple[str, str]] = ()) -> dict[str, float | None]:
    """Each queued entry's estimated wait until its feedback, by name (and of ``later``: (name,
    lab) pairs not taken in yet, behind everything queued): the queue played forward in fair
    order, each grading taking its lab's :func:`lab_seconds` (any lab's median where its own has
    none yet), on ``slots`` slots that take the next entry as soon as one frees -- those grading
    now freeing when their lab's time has passed. ``None`` while no grading's time is known. A
    lab that takes several slots is counted as one (the estimate is then short)."""
    import heapq

    fallback = statistics.median(seconds.values()) if seconds else None
    if fallback is None:
        return {e.name: None for e in order(book)} | {name: None for name, _ in later}
    running = [e for e in book.values() if e.state == GRADING]
    free = [max(now, e.started + seconds.get(e.lab, fallback)) for e in running][:max(slots, 1)]
    free += [now] * (max(slots, 1) - len(free))
    heapq.heapify(free)
    out = {}
    for name, lab in [(e.name, e.lab) for e in order(book)] + list(later):
        ends = heapq.heappop(free) + seconds.get(lab, fallback)
        out[name] = ends - now
        heapq.heappush(free, ends)
    return out


def status(book: Book, student: str, slots: int = 1, now: float | None = None,
           seconds: dict[str, float] | None = None) -> list[dict]:
    """One student's own entries, newest first, as plain data: each with its place in the
    queue (1 = next) and, where it is queued, the estimated wait in seconds until its feedback
    (:func:`waits`; ``seconds``: per lab, default :func:`lab_seconds` of the book)."""
    now = time.time() if now is None else now
    line = {e.name: k for k, e in enumerate(order(book), 1)}
    wait = waits(book, slots, now, lab_seconds(book) if seconds is None else seconds)
    out = []
    for e in sorted((e for e in book.values() if e.student == student), key=lambda e: (e.when, e.name), reverse=True):
        w = wait.get(e.name)
        out.append({**asdict(e), "position": line.get(e.name), "wait_s": None if w is None else math.ceil(w)})
    return out


def describe(row: dict) -> str:
    """One status row in words, as ``serve --status`` prints it."""
    head = f"{row['lab']} submitted {row['submitted']}: {row['state']}"
    if row["state"] in (QUEUED, ARRIVED):
        wait = "unknown yet" if row["wait_s"] is None else f"about {max(1, round(row['wait_s'] / 60))} min"
        head += f", number {row['position']} in the queue, estimated wait {wait}"
    elif row["state"] == GRADED:
        head += f", {row['score']:g}/{row['max_score']:g}; fetch your feedback"
    return head + (f" -- {row['message']}" if row["message"] else "")


class Store:
    """The book on disk: ``COURSE/.autograder/serve/state.json``, replaced atomically (written
    beside it, flushed, renamed over it), so a service killed at any point leaves either the
    old book or the new one."""

    def __init__(self, course: Path):
        self.path = Path(course) / FOLDER / "state.json"

    def load(self) -> tuple[Book, dict]:
        """The book and the service's settings last saved with it (empty when there is none)."""
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}, {}
        known = {f.name for f in fields(Entry)}
        book = {e["name"]: Entry(**{k: v for k, v in e.items() if k in known}) for e in data["entries"]}
        return book, data.get("service", {})

    def save(self, book: Book, service: dict | None = None) -> None:
        """Write the book (and the service's settings, e.g. its slots, for ``--status``)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        data = {"version": 1, "service": service or {},
                "entries": [asdict(e) for e in sorted(book.values(), key=lambda e: (e.seen, e.name))]}
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
