"""The grading engine: ``grade`` and ``serve`` grade every submission through one :class:`Engine`.

The engine takes a submission's recorded grade where one was made under the same fingerprint
(:mod:`autograder.grader.engine.resume`: a run stopped half-way, a service killed after a grade was
written), hands the rest to a backend, and records each result once, in the one process that
drives it (the gradebook's only writer). Backends, one interface:

* :class:`Here` -- one grading at a time, in this process (:func:`grade_one`);
* :class:`Slots` -- the grading slots of a Ray: a local one (``--workers N``) or a cluster's
  (``--ray ADDRESS``), a Ray task a grading (:mod:`autograder.grader.engine.pool`).

A backend is asked for what is free (slot units), started on a submission, and waited on for
whichever grading ends first, so a driver hands the next submission to a slot as soon as it
frees -- no rounds that wait for their slowest grading. A Kubernetes Jobs backend would be one
more class here with the same four methods (docs/authors/grading-engine.md).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ...report import Outcome
from ..nbgrading import nbgrader_run, scratch_course
from . import settle
from .limits import Limits


@dataclass(frozen=True)
class Job:
    """One submission to grade, and the fingerprint its grade is recorded under."""

    student: str
    assignment: str
    mark: str


@dataclass(frozen=True)
class Finished:
    """A grading that ended: its outcome, and where it ran (``""``: here, or taken from its record)."""

    job: Job
    outcome: Outcome
    where: str = ""
    recorded: bool = False  # taken from the record of an earlier grading, not graded now


class Backend(Protocol):
    """Where gradings run. Units are grading slots; a lab may take several (``width``)."""

    capacity: int

    def width(self, assignment: str) -> int:
        """Slot units one grading of ``assignment`` holds."""

    def start(self, job: Job) -> None:
        """Begin grading ``job`` (the driver checked that its width is free)."""

    def wait(self, timeout_s: float | None) -> list[Finished]:
        """Gradings that ended, waiting at most ``timeout_s`` for the first (``None``: until one does)."""

    def close(self) -> None:
        """Stop whatever still runs (Ctrl-C, an error): nothing keeps grading in the background."""


@contextmanager
def no_bytecode():
    """No process of the grading writes compiled files (``.pyc``), so that one appearing in the
    kit while a submission runs was planted (:class:`scratch_course.Untouchable` puts it back)."""
    before = sys.dont_write_bytecode, os.environ.get("PYTHONDONTWRITEBYTECODE")
    sys.dont_write_bytecode, os.environ["PYTHONDONTWRITEBYTECODE"] = True, "1"
    try:
        yield
    finally:
        sys.dont_write_bytecode = before[0]
        if before[1] is None:
            os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        else:
            os.environ["PYTHONDONTWRITEBYTECODE"] = before[1]


def grade_one(course: Path, student: str, assignment: str, gradebook: bytes, limits: Limits) -> Outcome:
    """Autograde one submission in a scratch course of its own; merge only its grade back.

    ``gradebook`` is the course's gradebook without students (:func:`scratch_course.template`).
    Nothing of the course or the kit may change while the submission runs
    (:class:`scratch_course.Untouchable`): if something did, the submission found it anyway --
    it is put back, and the submission scores 0.
    """
    untouchable = scratch_course.Untouchable(course, nbgrader_run.KIT_ROOT)
    left_out, left_behind, changed = [], [], []
    try:
        with tempfile.TemporaryDirectory(prefix="autograder-scratch-") as tmp:
            scratch, left_out = scratch_course.make(course, student, assignment, gradebook, Path(tmp))
            try:
                outcome = nbgrader_run.autograde(scratch, assignment, student, limits)
            finally:  # put back first, then copy its autograded work in
                changed = untouchable.restore()
            left_behind = scratch_course.bring_back(scratch, course, student, assignment)
    except Exception as exc:  # whatever the submission left for the grader to trip on costs only its own grade
        outcome = Outcome(student, assignment, error=f"grading failed: {type(exc).__name__}: {str(exc)[:300]}",
                          log=traceback.format_exc())
    return settle.settle(course, outcome, left_out, left_behind, changed)


class Here:
    """One grading at a time, in this process: :meth:`start` notes the job, :meth:`wait` grades it."""

    capacity = 1

    def __init__(self, course: Path, limits: Limits, gradebook: bytes | None = None):
        self.course, self.limits, self.gradebook = Path(course), limits, gradebook
        self._next: Job | None = None

    def width(self, assignment: str) -> int:
        return 1

    def start(self, job: Job) -> None:
        self._next = job

    def wait(self, timeout_s: float | None) -> list[Finished]:
        job, self._next = self._next, None
        if job is None:
            if timeout_s:
                time.sleep(timeout_s)
            return []
        # the template as the course has it now: it knows labs released since the service started
        gradebook = self.gradebook if self.gradebook is not None else scratch_course.template(self.course)
        with no_bytecode():
            return [Finished(job, grade_one(self.course, job.student, job.assignment, gradebook, self.limits))]

    def close(self) -> None:
        self._next = None


class Slots:
    """The grading slots of a Ray: started here with ``workers`` slots, or the cluster at
    ``address``; each grading one Ray task in a slot (:func:`autograder.grader.engine.pool.submit`)."""

    def __init__(self, course: Path, limits: Limits, kit: str, labs: set[str], *, workers: int | None = None,
                 address: str | None = None, gradebook: bytes | None = None, say=print):
        import ray

        from ... import seed
        from . import pool
        from .slots import RESOURCE

        self.course, self.limits, self.kit, self.gradebook = Path(course), limits, kit, gradebook
        self.seed = seed.base() or ""
        pool.start(workers, address)
        try:
            lines, shapes = pool.nodes(kit, limits.sandboxed)
            for line in lines:
                say(line)
            self.widths = pool.widths(shapes, labs)
        except BaseException:  # a node unfit for the course: the Ray started here goes with it
            ray.shutdown()
            raise
        self.capacity = max(1, int(ray.cluster_resources().get(RESOURCE, 1)))
        self._task = pool.task()
        self._running: dict = {}  # Ray object ref -> (job, files left out)

    def width(self, assignment: str) -> int:
        return self.widths.get(assignment, 1)

    def start(self, job: Job) -> None:
        from . import pool

        gradebook = self.gradebook if self.gradebook is not None else scratch_course.template(self.course)
        ref, left_out = pool.submit(self._task, self.course, job.student, job.assignment, gradebook, self.limits,
                                    self.kit, self.seed, self.width(job.assignment))
        self._running[ref] = (job, left_out)

    def wait(self, timeout_s: float | None) -> list[Finished]:
        import ray

        from . import pool

        if not self._running:
            if timeout_s:
                time.sleep(timeout_s)
            return []
        ready, _ = ray.wait(list(self._running), num_returns=1, timeout=timeout_s)
        out = []
        for ref in ready:
            job, left_out = self._running.pop(ref)
            outcome, where = pool.collect(self.course, job.student, job.assignment, ref, left_out, self.limits)
            out.append(Finished(job, outcome, where))
        return out

    def close(self) -> None:
        import ray

        from . import slots

        stopped = bool(self._running)
        for ref in self._running:  # Ctrl-C or an error here: nothing keeps grading in the background
            ray.cancel(ref, force=True)
        self._running.clear()
        ray.shutdown()  # a local Ray stops; a cluster is only left
        if stopped:  # what the cancelled gradings started, in this machine's slots
            slots.sweep_unheld()


class Engine:
    """Gradings of one course through one backend, each recorded once (:mod:`resume`)."""

    def __init__(self, course: Path, backend: Backend, limits: Limits, kit: str | None = None, regrade: bool = False):
        from . import resume

        self.course, self.backend, self.limits = Path(course), backend, limits
        self.kit = kit or resume.kit_fingerprint()
        self.regrade = regrade
        self._held: dict[Job, int] = {}  # running jobs and the slot units each holds
        self._recorded: list[Finished] = []

    def free(self) -> int:
        """Slot units no grading holds now."""
        return self.backend.capacity - sum(self._held.values())

    def busy(self) -> bool:
        """Whether a grading runs, or a recorded one waits to be handed out."""
        return bool(self._held or self._recorded)

    def fits(self, assignment: str) -> bool:
        """Whether a grading of ``assignment`` can start now (its width is free, or nothing runs:
        a lab wider than the whole backend still grades, alone)."""
        return not self._held or self.backend.width(assignment) <= self.free()

    def job(self, student: str, assignment: str) -> Job:
        """The job of one submission as it stands on disk now (its fingerprint)."""
        from . import resume

        return Job(student, assignment, resume.fingerprint(self.course, student, assignment, self.kit, self.limits))

    def recorded(self, job: Job) -> Outcome | None:
        """The grade recorded for exactly this job, if any (never with ``regrade``)."""
        from . import resume

        return None if self.regrade else resume.load(self.course, job.student, job.assignment, job.mark)

    def start(self, job: Job) -> None:
        """Grade ``job``: its recorded grade where there is one, else in the backend."""
        outcome = self.recorded(job)
        if outcome is not None:
            self._recorded.append(Finished(job, outcome, recorded=True))
            return
        self._held[job] = self.backend.width(job.assignment)
        self.backend.start(job)

    def wait(self, timeout_s: float | None = None) -> list[Finished]:
        """Gradings that ended (recorded ones at once), each saved for ``resume`` -- except those
        the grader itself could not carry out (``Outcome.retry``)."""
        from . import resume

        if self._recorded:
            out, self._recorded = self._recorded, []
            return out
        out = self.backend.wait(timeout_s)
        for f in out:
            self._held.pop(f.job, None)
            resume.save(self.course, f.outcome, f.job.mark)
        return out

    def abandon(self) -> list[Job]:
        """The jobs running when the backend failed, no longer waited on (the caller says what
        becomes of them: a service queues them again)."""
        jobs = list(self._held)
        self._held.clear()
        return jobs

    def close(self) -> None:
        """Stop what still runs (:meth:`Backend.close`)."""
        self.backend.close()
        self._held.clear()

    def run(self, jobs: list[Job], done) -> None:
        """Grade ``jobs`` in order, each as soon as its width is free; ``done(finished)`` for each,
        in this process, as it ends. Ctrl-C or an error stops whatever still runs."""
        waiting = list(jobs)
        try:
            while waiting or self.busy():
                while waiting and self.fits(waiting[0].assignment):
                    self.start(waiting.pop(0))
                for f in self.wait(None):
                    done(f)
        finally:
            self.close()
