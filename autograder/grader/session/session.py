"""The grader's side of one grading run: seeds, the learner's kernel as a remote, verdicts.

A :class:`Session` lives in the grader process (``python -m autograder check|grade``), which
never runs learner code. It draws this run's seed, runs each check at most once when the
kernel's hidden test cell asks for it, and keeps the verdicts: those, not what the kernel's
cells show, are the grade. A check talks to learner code only through a :class:`~autograder.transport.Learner` --
requests out, plain JSON back -- and times it with the grader's own clock.

In a notebook that is not being graded (a learner's own ``autograder.check()``), the same
session runs inside the kernel (:func:`local`): there, tampering only fools the learner.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import math
import random
import secrets
import statistics
import threading
import time
from typing import Any, Callable

from ...kernel.channel import ProtocolError, recv, send
from ...checks import InstructorOnly
from ...labs import learner_names
from .catalog import for_lab, reference
from ...seed import base as seed_base
from ...report import Result
from ...targets import call_timeout_s

from ...transport import GRACE_S, Learner
from ..isolation.neighbours import near_loss

AGAIN = 2  # a check disturbed by another grading's hold is run again this often, then once more holding


class Session:
    """One grading run of one notebook of ``lab``: seed, memo, and the grader's verdicts."""

    def __init__(self, lab: str, *, seed: int | None = None, learner: Learner | None = None):
        self.lab = lab
        self.checks = for_lab(lab)
        env_seed = seed_base()
        self.seed = seed if seed is not None else (
            int(env_seed) if env_seed else random.SystemRandom().randrange(2**31))
        self.call_timeout_s = call_timeout_s()  # read now: instructors and tests set it per run
        self.attach(learner or Learner())
        self.key = secrets.token_bytes(32)  # seals the grader's jobs (autograder.labs.lab01.instruments.seal)
        self.verdicts: dict[str, Result] = {}
        self._memo: dict = {}
        self._lock = threading.Lock()
        self._sealed = False
        self._process = None  # the reference process, while grading
        self._lab_ray = None  # the process that starts the lab's Ray, where the reference has a Ray of its own
        self._start_reference = None  # how the reference process starts, on first use (a blank never needs it)
        self._starting = threading.Lock()
        self._group = None  # the submission's control group (its learner side is paused in the reference's turns)
        self._pause = None  # how: "freeze" or "idle" (autograder.labs.pauses_learner)
        self._preparer = None  # the one thread that runs grader-side start-ups in the background (prepare)
        self._preparing: list = []  # their futures
        self._reference_space = None  # the reference's own work folder, where it has a Ray of its own (sandboxed)
        self.neighbours = None  # the other gradings of this machine, in a grading slot (autograder.grader.isolation.neighbours)
        self.held_notes: list[str] = []  # what was measured again because of them, for the grading's log
        self._windows: dict = {}  # memo key -> (start, end) of its measurement, monotonic seconds
        self._reads: set = set()  # the memo keys the check running now has read

    def attach(self, learner: Learner) -> None:
        """Make ``learner`` the side the checks call: each call's deadline is this session's
        unless it names one, and only the names the lab's checks may call are sent."""
        self.learner = learner
        learner.timeout_s = self.call_timeout_s
        learner.names = learner_names(self.lab)

    def start(self, sandbox_dir=None, share: tuple[str, ...] = (), group=None, ahead: bool = False) -> dict[str, str]:
        """Start what grading this lab needs before the kernel runs; the kernel's extra environment.

        Labs whose checks use Ray get a process that starts the lab's Ray; the kernel joins it
        (``RAY_ADDRESS`` and this Ray's own token). Other labs need nothing. With
        ``sandbox_dir`` that process and its Ray run in a sandbox of their own
        (:meth:`autograder.grader.session.reference_process.ReferenceProcess._sandboxed`), on the learner's
        side of the submission's control group ``group`` (:class:`~autograder.grader.isolation.cgroup.Cgroup`),
        where there is one.

        ``ahead``: the submission has answers (:func:`~autograder.grader.nbgrading.nbgrader_run.answered`), so
        its checks will likely call the reference: where the lab's checks module says what to start
        ahead (its ``ahead(session)``), that starts in the background once the lab's Ray is up, while
        the kernel starts and runs its first cells (:meth:`prepare`).

        That process is the reference process, unless the lab's reference has a Ray of its own
        (:func:`autograder.labs.own_reference_ray`) and this run is sandboxed (unsandboxed, one Ray
        is cheaper and tampering fools only the learner): then it serves the lab's kit steps only, and
        the reference process starts that other Ray in a sandbox of another user
        (:data:`~autograder.grader.isolation.sandbox.REFERENCE_UID`), with its own PID and network
        namespaces, which no learner process enters. That process starts when a check first
        calls the reference, or ahead (above), not here: a blank never pays for its Ray. It
        is in the control group's caps but not on its learner side, which :meth:`side_by_side`
        pauses while the reference's turns are timed: frozen, or at idle CPU priority
        (:func:`~autograder.labs.pauses_learner`).
        """
        from ...labs import needs_ray, own_reference_ray, pauses_learner
        from ..isolation import workspace
        from .reference_process import ReferenceProcess
        from ..isolation.sandbox import REFERENCE_UID

        self._grading = True
        if not needs_ray(self.lab):
            return {}
        learner_side = group.learner_procs if group else ()
        if sandbox_dir is None or not own_reference_ray(self.lab):  # unsandboxed, tampering fools only the learner
            self._process = ReferenceProcess(self.lab, ray=True, sandbox_dir=sandbox_dir, share=share,
                                             cgroup=learner_side)
            return dict(self._process.ray_env)
        self._reference_space = workspace.make(at=sandbox_dir / "reference")  # a cap of its own, the same size
        own = self._reference_space.path
        self._start_reference = functools.partial(ReferenceProcess, self.lab, ray=True, sandbox_dir=own,
                                                  cgroup=group.reference_procs if group else (), uid=REFERENCE_UID)
        self._pause = pauses_learner(self.lab)
        self._group = group if self._pause else None
        self._lab_ray = ReferenceProcess(self.lab, ray=True, sandbox_dir=sandbox_dir, share=share,
                                         cgroup=learner_side, copy="instruments")
        if ahead:
            self.prepare(self._ahead())
        return dict(self._lab_ray.ray_env)

    @property
    def ray_network(self):
        """bubblewrap's report on the sandbox of the lab's Ray (its network is the kernel's), or None."""
        return getattr(self._lab_ray or self._process, "network_from", None)

    def close(self) -> None:
        """Stop the reference process and the lab's Ray (once what :meth:`prepare` started is done)."""
        self._prepared()
        for name in ("_process", "_lab_ray"):
            process = getattr(self, name)
            if process is not None:
                process.close()
                setattr(self, name, None)
        if self._preparer is not None:  # after the processes it started: they die with its thread
            self._preparer.shutdown()
            self._preparer = None
        if self._reference_space is not None:
            self._reference_space.close()
            self._reference_space = None

    @property
    def reference(self) -> Learner:
        """The reference implementations, called like the learner's: in their own process while
        grading, in this process otherwise."""
        if self._process is None and self._grading:  # started when first needed
            from .reference_process import ReferenceProcess

            with self._starting:  # checks may run in threads: one process, started once
                if self._process is None:
                    with self._group.idle() if self._group is not None else contextlib.nullcontext():
                        # the learner side at idle CPU priority: a spinner cannot starve the reference's start
                        self._process = (self._start_reference or functools.partial(ReferenceProcess, self.lab))()
        if self._process is not None:
            self._process.remote.timeout_s = self.call_timeout_s
            return self._process.remote
        if self._reference is None:
            self._reference = Learner(namespace=self.answers(), timeout_s=self.call_timeout_s)
        return self._reference

    def ray_of(self, side: Learner) -> Learner:
        """Where kit steps about ``side``'s Ray objects run (Ray's task records of its actors, the
        grader's instruments it drives): the lab's Ray process for the learner where the reference
        has a Ray of its own; the reference's process otherwise."""
        started = self._process.remote if self._process is not None else None  # not self.reference: that starts it
        if self._lab_ray is not None and side is not started:
            self._lab_ray.remote.timeout_s = self.call_timeout_s
            return self._lab_ray.remote
        return self.reference

    def prepare(self, start: Callable[[], Any]) -> None:
        """Run ``start()`` -- grader-side start-up, such as the reference process or the grader's
        instruments -- in the background while the notebook's own cells run. Every check
        (:meth:`run`) and :meth:`close` wait for it first, so it never overlaps a check's work: no
        timed call, and no other call on the connections it uses. Its errors are dropped: the
        check that needs what it starts starts it again, and meets them there.

        Only while grading: in a learner's own run the notebook's cells measure the learner's own
        numbers, which start-up work beside them would bend; there each thing starts when needed."""
        if not self._grading or start is None:
            return
        if self._preparer is None:
            # one thread for the whole run: a sandbox dies with the *thread* that started it
            # (bubblewrap's --die-with-parent is PR_SET_PDEATHSIG), so it must outlive them all
            self._preparer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="autograder-prepare")
        self._preparing.append(self._preparer.submit(start))

    def _ahead(self) -> Callable[[], Any] | None:
        """The lab's grader-side start-up worth running ahead (its checks module's ``ahead``), or None."""
        import importlib

        from .catalog import checks_module

        ahead = getattr(importlib.import_module(checks_module(self.lab)), "ahead", None)
        return ahead(self) if ahead is not None else None

    def _prepared(self) -> None:
        """Wait for every background start-up (:meth:`prepare`) to end; their errors are dropped
        (the foreground's own start meets and reports them)."""
        while self._preparing:
            self._preparing.pop(0).exception()

    def answers(self) -> dict:
        """The reference implementations as objects of this process, by the notebook's names: the
        grader's own model and timing loop (lab 05's ``plan``, lab 00's ``repeat_for``), never
        learner-facing work. :class:`~autograder.checks.InstructorOnly` in a student bundle."""
        return reference(self.lab)

    _reference: Learner | None = None
    _grading = False  # set by start(): the reference then runs in its own process
    early_stop = True  # side_by_side ends its rounds once the tiers' verdicts are decided

    def side_by_side(self, learner: Callable[[], float], reference: Callable[[], float], *, rounds: int,
                     stop_below: float = 0.0, tiers: tuple[float, ...] = (),
                     also_graded: Callable[[], list[float]] | None = None):
        """The learner's rate over the reference's, measured interleaved on the grader's clock.

        ``learner()`` and ``reference()`` each run one round of the same work (fresh inputs,
        prepared outside the clock) and return the seconds its timed part took. The kit's one
        rule, as :func:`course.bench.compare`: rounds alternate who goes first, and the ratio
        is the median of the per-round ratios. A warm-up round goes first; when it and the
        round after it are both below ``stop_below`` (far under every tier), that is the
        answer, so a slow submission is not timed over and over; one cold round alone does not
        decide (the lab 04 solution once scored 0.18x against 0.4 / 0.6 tiers in a CI run).

        With ``tiers`` (the thresholds the ratio is graded against), the rounds end as soon as the
        median of all ``rounds`` falls on the same side of every tier whatever the rounds not yet
        run would read (:func:`decided`): the verdict is exactly the one every round would give,
        sooner -- 3 rounds of 5, or 4 of 7, when they agree. A check that grades the lower of this
        median and the median of a second per-round reading passes ``also_graded`` (that reading's
        ratios so far, one a round): the rounds then end only once both are decided, as the lower
        of two medians is on a tier's side once each is. ``calibrate`` clears :attr:`early_stop`,
        so that the ratios it reports are the medians of every round.

        Where the reference has a Ray of its own, the learner's side (its kernel, the lab's Ray
        and its actors) is frozen during each reference turn, or put at idle CPU priority (the lab's
        spec says which): a learner thread that spins whenever its own code is not being called
        cannot take the cores from the reference. The same holds the other way: the reference's
        side (its process and its own Ray, in a cpu group of its own at the learner's weight) is at
        idle CPU priority during each learner turn, so that neither side's idle daemons run inside
        the other's timed window (docs/measurement.md#same-conditions).
        """
        from course.bench import Comparison, Measurement

        if self._group is not None:
            reference = self._paused(reference)
            learner = self._idled_reference(learner)

        warm = reference() / learner()
        if warm < stop_below:
            again = reference() / learner()
            if again < stop_below:
                return Comparison(Measurement([]), Measurement([]), [warm, again])
        mine, ref = [], []
        for r in range(rounds):
            if r % 2 == 0:
                mine.append(learner())
                ref.append(reference())
            else:
                ref.append(reference())
                mine.append(learner())
            if self.early_stop and decided([b / a for a, b in zip(mine, ref)], rounds, tiers) \
                    and (also_graded is None or decided(also_graded(), rounds, tiers)):
                break
        return Comparison(Measurement(mine), Measurement(ref), [b / a for a, b in zip(mine, ref)])

    def _paused(self, reference: Callable[[], float]) -> Callable[[], float]:
        """``reference`` run with the learner's side frozen (:meth:`Cgroup.paused`) or at idle CPU
        priority (:meth:`Cgroup.idle`)."""
        pause = self._group.idle if self._pause == "idle" else self._group.paused

        def turn() -> float:
            with pause():
                return reference()
        return turn

    def _idled_reference(self, learner: Callable[[], float]) -> Callable[[], float]:
        """``learner`` run with the reference's side at idle CPU priority (:meth:`Cgroup.idle`)."""

        def turn() -> float:
            with self._group.idle("reference"):
                return learner()
        return turn

    def rng(self, salt: int) -> random.Random:
        """This run's random stream number ``salt`` (same seed, same stream)."""
        return random.Random(self.seed * 1000 + salt)

    def memo(self, key, measure: Callable[[], Any]):
        """Run ``measure()`` once per key in this run (tiers share one measurement), noting when
        it ran (a check whose measurements a neighbour's hold overlapped is run again, :meth:`run`)."""
        from ...kernel.harness import memo

        def timed():
            start = time.monotonic()
            try:
                return measure()
            finally:
                self._windows[key] = (start, time.monotonic())
        self._reads.add(key)
        return memo(self._memo, key, timed)

    def tiered(self, name: str, measure: Callable[["Session"], Any], thresholds: tuple[float, ...]):
        """``measure(self)``, the ratio ``name`` graded in tiers: in a grading slot, a ratio that missed a
        tier by a little (:func:`~autograder.grader.isolation.neighbours.near_loss`) while another slot was
        grading is measured again with the other slots' gradings frozen, and that is the one graded
        -- a neighbour's load (memory bandwidth, page cache, disk, a burst of processes) never costs
        a tier (:mod:`autograder.grader.isolation.neighbours`)."""
        neighbours = self.neighbours
        busy = neighbours is not None and neighbours.busy()
        result = measure(self)
        if neighbours is None or not near_loss(result.ratio, thresholds) or not (busy or neighbours.busy()):
            return result
        with neighbours.held() as frozen:
            again = measure(self)
        self.held_notes.append(f"{name}: {result.ratio:.2f}x beside busy slots, "
                               f"{again.ratio:.2f}x with {frozen} other grading(s) frozen; the second is graded")
        return again

    def run(self, name: str) -> Result:
        """The verdict of check ``name``: measured the first time it is asked for, then kept."""
        with self._lock:
            if name in self.verdicts:
                return self.verdicts[name]
            check = self.checks.get(name)
            if check is None:
                return Result(str(name)[:60], 0.0, 0.0, "no such check in this lab")
            if self._sealed:
                return Result(name, 0.0, check.points, "asked for after grading had ended")
            self._prepared()  # no background start-up runs beside a check
            timed = getattr(check, "timed", False) and self.neighbours is not None
            busy = timed and self.neighbours.busy()
            for attempt in range(AGAIN + 1):
                start = time.monotonic()
                self._reads = set()
                if attempt < AGAIN or self.neighbours is None:
                    result = self._verdict(check)
                else:  # disturbed every time: run with the others held, which nothing can disturb
                    with self.neighbours.held():
                        result = self._verdict(check)
                if self.neighbours is None or attempt == AGAIN or not self.neighbours.disturbed(start, time.monotonic()):
                    break
                self._forget(start)
                self.held_notes.append(f"{name}: run again, another grading held this machine while it ran")
            if timed and not result.passed and (busy or self.neighbours.busy()):
                result = self._held_again(check, result)
            self.verdicts[name] = result
            return result

    def _held_again(self, check, lost: Result) -> Result:
        """A timed check (not a tier: :meth:`tiered` measures those again) that lost while another
        slot was grading, run once more with the other slots' gradings frozen and what it read
        measured again: that run is graded (:mod:`autograder.grader.isolation.neighbours`). A
        blank's checks fail fast, so this costs little where nothing was there to time."""
        for key in self._reads:
            self._memo.pop(key, None)
            self._windows.pop(key, None)
        self._reads = set()
        with self.neighbours.held() as frozen:
            result = self._verdict(check)
        self.held_notes.append(f"{check.name}: lost beside busy slots ({lost.message[:120]}); run again with "
                               f"{frozen} other grading(s) frozen: {'passed' if result.passed else 'lost again'}, "
                               "which is graded")
        return result

    def _verdict(self, check) -> Result:
        """Run ``check`` once: its result, whatever it raised."""
        name = check.name
        try:
            note = check.fn(self)  # a check may say what it measured when it passes (see checks.tiers)
            return Result(name, check.points, check.points, note[:500] if isinstance(note, str) else "")
        except AssertionError as exc:
            return Result(name, 0.0, check.points, str(exc).strip().splitlines()[0][:500]
                          if str(exc).strip() else "failed")
        except InstructorOnly as exc:  # grading: the kit lost its references, a grader fault, never a skip
            return (_grader_fault(name, check.points, exc) if self._grading else
                    Result(name, 0.0, check.points, "measured only by your instructor's grading (it runs the "
                           "reference side by side; this student install has none)", skipped=True))
        except Exception as exc:  # a grader bug: the submission must not gain or crash from it
            return _grader_fault(name, check.points, exc)

    def _forget(self, since: float) -> None:
        """Drop the memos measured from ``since`` on (monotonic seconds): a check run again measures them again."""
        for key, (start, _) in list(self._windows.items()):
            if start >= since:
                self._memo.pop(key, None)
                del self._windows[key]

    def serve(self, conn) -> None:
        """Answer one kernel connection: each ``check`` request gets a measured verdict."""
        self.attach(Learner(conn))
        while not self.learner.broken:
            message, self.learner.pending = self.learner.pending, None
            try:
                message = message or recv(conn)
            except ProtocolError:
                return
            if message["op"] != "check":
                return
            result = self.run(str(message.get("name")))
            try:
                send(conn, {"op": "verdict", "name": result.name,
                            "passed": result.passed and result.max_score > 0, "message": result.message})
            except ProtocolError:
                return

    def seal(self) -> list[Result]:
        """End the run: no more checks; every check's verdict, in registration order.

        A check the kernel never asked for scores 0: its hidden test cell did not run as
        written (skipped, rewritten, or the kernel died before it).
        """
        locked = self._lock.acquire(timeout=GRACE_S * 8)  # a check still running ends by then
        try:
            self._sealed = True
            return [self.verdicts.get(name) or Result(
                name, 0.0, c.points, "its hidden test did not run in the notebook (skipped, "
                "rewritten, or the kernel stopped before it)") for name, c in self.checks.items()]
        finally:
            if locked:
                self._lock.release()


def decided(ratios: list[float], rounds: int, tiers: tuple[float, ...]) -> bool:
    """Whether the median of ``rounds`` per-round ratios, of which ``ratios`` are measured, is on the
    same side of every tier in ``tiers`` whatever the rest read: with the rest all 0 and all
    infinite (the two extremes a median can be pushed to) it is. Without tiers, only when every
    round has run."""
    if len(ratios) >= rounds or not tiers:
        return len(ratios) >= rounds
    left = rounds - len(ratios)
    low, high = (statistics.median([*ratios, *[fill] * left]) for fill in (0.0, math.inf))
    return all((low >= tier) == (high >= tier) for tier in tiers)


def _grader_fault(name: str, points: float, exc: Exception) -> Result:
    """A check the grader itself could not finish: no points, and a line asking for a report."""
    return Result(name, 0.0, points, f"the grader could not finish this check ({type(exc).__name__}: {exc}); "
                  "please report it")


def local(lab: str | None = None, namespace: dict | None = None) -> Session:
    """A fresh in-kernel session, for ``autograder.check()`` and hidden cells run outside grading.

    Fresh each time, so a learner who fixes a function and checks again is measured again.
    Learner names are looked up in ``namespace`` (default: the notebook's globals).
    """
    from ...kernel.stash import STASH

    lab = lab or STASH.lab
    if lab is None:
        raise RuntimeError("run the lab's first cell (it calls autograder.begin) first")
    return Session(lab, learner=Learner(namespace=namespace))
