"""The grader's side of one grading run: seeds, the learner's kernel as a remote, verdicts.

A :class:`Session` lives in the grader process (``python -m autograder check|grade``), which
never runs learner code. It draws this run's seed, runs each check at most once when the
kernel's hidden test cell asks for it, and keeps the verdicts: those, not what the kernel's
cells show, are the grade. A check talks to learner code only through :class:`Learner` --
requests out, plain JSON back -- and times it with the grader's own clock.

In a notebook that is not being graded (a learner's own ``autograder.check()``), the same
session runs inside the kernel (:func:`local`): there, tampering only fools the learner.
"""

from __future__ import annotations

import math
import os
import random
import secrets
import signal
import threading
from dataclasses import dataclass
from typing import Any, Callable

from .channel import ProtocolError, peer_pid, recv, send
from .reference_process import InstructorOnly
from .seed import base as seed_base
from .report import Result
from .targets import call_timeout_s

GRACE_S = 15.0       # the kernel stops learner code at the deadline itself; this is its slack
INTERRUPT_WAIT_S = 10.0  # after interrupting a kernel that did not, how long to wait for it


@dataclass
class Callback:
    """A grader-side callable handed to learner code as a stand-in (e.g. a workload).

    Its calls run in the grader's process, timed by the grader; learner code sees only a
    function that asks for them. ``deferred``: calls return at once and the work runs at the
    learner's next ``course.backend.sync()``, as a GPU launch does.
    """

    fn: Callable[..., Any]
    deferred: bool = False
    name: str = "fn"


def named(name: str) -> dict:
    """An argument that stands for the object called ``name`` on the other side (a class, a function)."""
    return {"learner": name}


def stashed(key: str) -> dict:
    """An argument that stands for what an earlier request kept under ``key`` (``keep=key``)."""
    return {"stashed": key}


def _is_number(v) -> bool:
    """A finite int or float: NaN compares False with everything, so it would slip past any
    "too low" / "too high" test (JSON carries it as ``NaN``)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an int too large for a float
        return False


def _is_array(v) -> bool:
    return (isinstance(v, dict) and isinstance(v.get("shape"), list) and isinstance(v.get("data"), list)
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in v["shape"])
            and math.prod(v["shape"]) == len(v["data"]) and all(_is_number(x) for x in v["data"]))


def _is_integer(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def plain(value, returns: str, what: str):
    """A value from the kernel, checked to be exactly the plain kind asked for.

    The kit's code in the kernel converts learner values before sending them, but that code
    is the learner's to replace: the grader trusts only the type of what arrives.
    """
    ok = {
        "none": lambda v: v is None,
        "number": _is_number,
        "integer": _is_integer,
        "array": _is_array,
        "integers": lambda v: isinstance(v, list) and all(_is_integer(x) for x in v),
        "arrays": lambda v: isinstance(v, list) and all(_is_array(x) for x in v),
        "strings": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "string": lambda v: isinstance(v, str),
        "json": lambda v: True,  # anything the channel delivered is plain JSON; the check reads it strictly
    }[returns]
    if not ok(value):
        raise AssertionError(f"{what}: the kernel sent back a value that is not {returns}")
    return float(value) if returns == "number" else value


class Learner:
    """The learner's kernel as the grader sees it: call a learner object by name."""

    def __init__(self, conn=None, *, namespace: dict | None = None):
        self._conn = conn
        self._namespace = namespace  # in-process only: where learner names are looked up
        self._pid = peer_pid(conn) if conn is not None else None
        self.hung: dict[str, float] = {}  # learner names stopped for running past their deadline
        self.broken = ""                  # why the kernel can no longer be asked anything
        self.pending: dict | None = None  # a check request that arrived while a call was open

    def call(self, name: str, *args, what: str, returns: str = "none", timeout_s: float = 60.0,
             prepare: str | None = None, then: str | None = None, keep: str | None = None):
        """``name(*args)`` in the learner's kernel; its return value as plain JSON.

        ``name`` is a learner object or a kit step (``kit.<step>``, :mod:`autograder.routines`);
        arguments are plain JSON, :class:`Callback` s, or specs (:func:`named`, :func:`stashed`).
        ``keep``: keep the value on the other side under that key (for a later :func:`stashed`)
        instead of sending it back. Raises ``AssertionError`` with a one-line reason when the
        learner's code fails, hangs or returns the wrong kind of value.
        """
        if name in self.hung:
            raise AssertionError(f"{what} was already stopped once for running past "
                                 f"{self.hung[name]:g} s; not run again")
        if self.broken:
            raise AssertionError(self.broken)
        callbacks = [a for a in args if isinstance(a, Callback)]
        request = {"op": "call", "name": name, "what": what, "returns": "none" if keep else returns,
                   "timeout_s": timeout_s, "prepare": prepare, "then": then, "keep": keep,
                   "args": [{"callback": callbacks.index(a), "deferred": a.deferred, "name": a.name}
                            if isinstance(a, Callback) else a for a in args]}
        wait_s = timeout_s * (2 if then else 1) + GRACE_S
        reply = self._exchange(request, callbacks, wait_s) if self._conn else self._local(request, callbacks)
        if reply.get("op") == "error":
            if reply.get("hung") is True:
                self.hung[name] = timeout_s
            raise AssertionError(str(reply.get("message"))[:500])
        if reply.get("op") != "result":
            raise AssertionError(self._break("the kernel answered out of turn"))
        return plain(reply.get("value"), "none" if keep else returns, what)

    def timed(self, name: str, *args, **kwargs) -> tuple[float, Any]:
        """(seconds on the grader's clock, value) of one :meth:`call`."""
        from .harness import perf_counter

        start = perf_counter()
        value = self.call(name, *args, **kwargs)
        return perf_counter() - start, value

    def _local(self, request: dict, callbacks: list[Callback]) -> dict:
        from . import agent

        return agent.execute(request, lambda cid, a: callbacks[cid].fn(*a), self._namespace)

    def _exchange(self, request: dict, callbacks: list[Callback], wait_s: float) -> dict:
        """Send the request; run the callbacks it triggers; return the final reply."""
        from .harness import perf_counter

        deadline = perf_counter() + wait_s
        interrupted = False
        try:
            send(self._conn, request)
            while True:
                try:
                    message = recv(self._conn, deadline - perf_counter())
                except TimeoutError:
                    if interrupted:
                        raise AssertionError(self._break(
                            f"{request['what']} did not finish within {request['timeout_s']:g} s and the "
                            "kernel did not respond to an interrupt")) from None
                    self.hung[request["name"]] = request["timeout_s"]
                    self._interrupt()
                    interrupted, deadline = True, perf_counter() + INTERRUPT_WAIT_S
                    continue
                if message["op"] == "check":  # the notebook moved on: this call was abandoned
                    self.pending = message
                    return {"op": "error", "hung": True, "message":
                            f"{request['what']} was interrupted in the notebook before it finished"}
                if message["op"] != "callback":
                    if interrupted:
                        message = {"op": "error", "hung": True, "message":
                                   f"{request['what']} did not finish within {request['timeout_s']:g} s "
                                   "and was stopped by the grader"}
                    return message
                send(self._conn, self._run_callback(message, callbacks))
        except ProtocolError as exc:
            raise AssertionError(self._break(f"the learner's kernel broke off grading ({exc})")) from None

    @staticmethod
    def _run_callback(message: dict, callbacks: list[Callback]) -> dict:
        cid, args = message.get("id"), message.get("args")
        if not (isinstance(cid, int) and 0 <= cid < len(callbacks) and isinstance(args, list)):
            return {"op": "raise", "message": "no such callback"}
        try:
            return {"op": "return", "value": callbacks[cid].fn(*args)}
        except (TypeError, ValueError, KeyError) as exc:
            return {"op": "raise", "message": str(exc)}

    def _interrupt(self) -> None:
        """Interrupt the kernel (its real pid, from the socket), as Jupyter's stop button does."""
        if self._pid and self._pid != os.getpid():
            try:
                os.kill(self._pid, signal.SIGINT)
            except OSError:
                pass

    def _break(self, why: str) -> str:
        self.broken = why
        return why


class Session:
    """One grading run of one notebook of ``lab``: seed, memo, and the grader's verdicts."""

    def __init__(self, lab: str, *, seed: int | None = None, learner: Learner | None = None):
        from .checks import for_lab

        self.lab = lab
        self.checks = for_lab(lab)
        env_seed = seed_base()
        self.seed = seed if seed is not None else (
            int(env_seed) if env_seed else random.SystemRandom().randrange(2**31))
        self.call_timeout_s = call_timeout_s()  # read now: instructors and tests set it per run
        self.learner = learner or Learner()
        self.key = secrets.token_bytes(32)  # seals the grader's jobs (course.fleet.seal)
        self.verdicts: dict[str, Result] = {}
        self._memo: dict = {}
        self._lock = threading.Lock()
        self._sealed = False
        self._process = None  # the reference process, while grading

    def start(self, sandbox_dir=None, share: tuple[str, ...] = (), cgroup: tuple[str, ...] = ()) -> dict[str, str]:
        """Start what grading this lab needs before the kernel runs; the kernel's extra environment.

        Labs whose checks use Ray get a reference process that starts the lab's Ray; the
        kernel joins it (``RAY_ADDRESS`` and this Ray's own token). Other labs need nothing.
        With ``sandbox_dir`` that process and its Ray run in a sandbox of their own
        (:meth:`autograder.reference_process.ReferenceProcess._sandboxed`), in the submission's
        control group ``cgroup`` (its ``cgroup.procs`` files), where there is one.
        """
        from .labs import needs_ray
        from .reference_process import ReferenceProcess

        self._grading = True
        if not needs_ray(self.lab):
            return {}
        self._process = ReferenceProcess(self.lab, ray=True, sandbox_dir=sandbox_dir, share=share, cgroup=cgroup)
        return dict(self._process.ray_env)

    @property
    def ray_network(self):
        """bubblewrap's report on the sandbox of the lab's Ray (its network is the kernel's), or None."""
        return getattr(self._process, "network_from", None)

    def close(self) -> None:
        """Stop the reference process (and the lab's Ray with it)."""
        if self._process is not None:
            self._process.close()
            self._process = None

    @property
    def reference(self) -> Learner:
        """The reference implementations, called like the learner's: in their own process while
        grading, in this process otherwise."""
        if self._process is None and self._grading:  # a lab without a shared Ray: started when first needed
            from .reference_process import ReferenceProcess

            self._process = ReferenceProcess(self.lab)
        if self._process is not None:
            return self._process.remote
        if self._reference is None:
            from .reference_process import namespace

            self._reference = Learner(namespace=namespace(self.lab))
        return self._reference

    _reference: Learner | None = None
    _grading = False  # set by start(): the reference then runs in its own process

    def side_by_side(self, learner: Callable[[], float], reference: Callable[[], float], *, rounds: int,
                     stop_below: float = 0.0):
        """The learner's rate over the reference's, measured interleaved on the grader's clock.

        ``learner()`` and ``reference()`` each run one round of the same work (fresh inputs,
        prepared outside the clock) and return the seconds its timed part took. The kit's one
        rule, as :func:`course.bench.compare`: rounds alternate who goes first, and the ratio
        is the median of the per-round ratios. A warm-up round goes first; when it and the
        round after it are both below ``stop_below`` (far under every tier), that is the
        answer, so a slow submission is not timed over and over; one cold round alone does not
        decide (the lab 04 solution once scored 0.18x against 0.4 / 0.6 tiers in a CI run).
        """
        from course.bench import Comparison, Measurement

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
        return Comparison(Measurement(mine), Measurement(ref), [b / a for a, b in zip(mine, ref)])

    def rng(self, salt: int) -> random.Random:
        """This run's random stream number ``salt`` (same seed, same stream)."""
        return random.Random(self.seed * 1000 + salt)

    def memo(self, key, measure: Callable[[], Any]):
        """Run ``measure()`` once per key in this run (tiers share one measurement)."""
        from .harness import memo

        return memo(self._memo, key, measure)

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
            try:
                check.fn(self)
                result = Result(name, check.points, check.points, "")
            except AssertionError as exc:
                result = Result(name, 0.0, check.points, str(exc).strip().splitlines()[0][:500]
                                if str(exc).strip() else "failed")
            except InstructorOnly as exc:  # grading: the kit lost its references, a grader fault, never a skip
                result = (_grader_fault(name, check.points, exc) if self._grading else
                          Result(name, 0.0, check.points, "measured only by your instructor's grading (it runs the "
                                 "reference side by side; this student install has none)", skipped=True))
            except Exception as exc:  # a grader bug: the submission must not gain or crash from it
                result = _grader_fault(name, check.points, exc)
            self.verdicts[name] = result
            return result

    def serve(self, conn) -> None:
        """Answer one kernel connection: each ``check`` request gets a measured verdict."""
        self.learner = Learner(conn)
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


def _grader_fault(name: str, points: float, exc: Exception) -> Result:
    """A check the grader itself could not finish: no points, and a line asking for a report."""
    return Result(name, 0.0, points, f"the grader could not finish this check ({type(exc).__name__}: {exc}); "
                  "please report it")


def local(lab: str | None = None, namespace: dict | None = None) -> Session:
    """A fresh in-kernel session, for ``autograder.check()`` and hidden cells run outside grading.

    Fresh each time, so a learner who fixes a function and checks again is measured again.
    Learner names are looked up in ``namespace`` (default: the notebook's globals).
    """
    from . import _lab

    lab = lab or _lab
    if lab is None:
        raise RuntimeError("run the lab's first cell (it calls autograder.begin) first")
    return Session(lab, learner=Learner(namespace=namespace))
