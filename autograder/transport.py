"""The grader's end of the channel: learner code (or the reference) as a remote it calls.

A :class:`Learner` sends one request at a time -- call the object called ``name`` on the
other side with plain arguments and :class:`Callback` stand-ins, under a deadline -- serves
the callbacks while it runs, and type-checks the plain JSON value that comes back against
the kind the check declared (:func:`plain`). The kernel's side of the same exchange is
:mod:`autograder.kernel.agent`. A ``Learner`` with a ``namespace`` instead of a connection runs
the requests in this process (a learner's own self-check, calibration).
"""

from __future__ import annotations

import math
import os
import signal
from dataclasses import dataclass
from typing import Any, Callable

from .kernel.channel import ProtocolError, peer_pid, recv, send

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


# The plain kind a kit step's return annotation declares (``-> int`` is "integer"): a step's
# signature is its declaration, so a call names a kind only where it wants a narrower one (a
# generic ``-> list`` step whose answers must be "integers" there).
ANNOTATED_KINDS = {"None": "none", "str": "string", "int": "integer", "float": "number", "dict": "json",
                   "list": "json", "list[int]": "integers", "list[str]": "strings"}


def declared_kind(fn: Callable) -> str:
    """The kind of value the kit step ``fn`` returns, read from its return annotation."""
    annotation = fn.__annotations__.get("return", "None")
    annotation = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
    if annotation not in ANNOTATED_KINDS:
        raise TypeError(f"kit step {fn.__name__} returns {annotation}: annotate it with one of "
                        f"{', '.join(ANNOTATED_KINDS)}")
    return ANNOTATED_KINDS[annotation]


class Steps:
    """The kit steps (:mod:`autograder.kernel.routines`, each lab's ``steps``) of one side, as
    methods.

    ``side.kit.<step>(*args, what=...)`` is ``side.call("kit.<step>", *args, what=...)``, checked
    here first: a step that does not exist, or arguments its signature does not take, raise at
    once in the grader (the check's bug, a grader fault) instead of reaching the other side as an
    error the learner would be blamed for. The value's kind is the step's return annotation
    (:func:`declared_kind`) unless the call says ``returns=`` or ``keep=``; the deadline is the
    side's (:attr:`Learner.timeout_s`) unless it says ``timeout_s=``.
    ``side.kit.<step>.timed(...)`` is :meth:`Learner.timed`.
    """

    def __init__(self, side: Learner):
        self._side = side

    def __getattr__(self, name: str) -> Step:
        from .kernel.routines import STEPS

        if name.startswith("_") or name not in STEPS:
            raise AttributeError(f"no kit step {name!r} (is the lab's steps module loaded?)")
        return Step(self._side, name, STEPS[name])


@dataclass(frozen=True)
class Step:
    """One kit step of one side (see :class:`Steps`)."""

    side: Learner
    name: str
    fn: Callable[..., Any]

    def _checked(self, args: tuple) -> str:
        import inspect

        inspect.signature(self.fn).bind(*args)  # TypeError: the check passes the wrong arguments
        return f"kit.{self.name}"

    def _declared(self, kwargs: dict) -> dict:
        """``kwargs`` with the step's declared kind unless the call names one or keeps the value."""
        if "keep" not in kwargs:
            kwargs.setdefault("returns", declared_kind(self.fn))
        return kwargs

    def __call__(self, *args, **kwargs):
        return self.side.call(self._checked(args), *args, **self._declared(kwargs))

    def timed(self, *args, **kwargs) -> tuple[float, Any]:
        return self.side.timed(self._checked(args), *args, **self._declared(kwargs))


class Learner:
    """The learner's kernel as the grader sees it: call a learner object by name."""

    def __init__(self, conn=None, *, namespace: dict | None = None, timeout_s: float = 60.0):
        self._conn = conn
        self.timeout_s = timeout_s  # a call's deadline unless it names one (the session's call_timeout_s)
        self.names: tuple[str, ...] | None = None  # the learner names a check may call (the lab's spec), if set
        self._namespace = namespace  # in-process only: where learner names are looked up
        self._pid = peer_pid(conn) if conn is not None else None
        self.hung: dict[str, float] = {}  # learner names stopped for running past their deadline
        self.broken = ""                  # why the kernel can no longer be asked anything
        self.pending: dict | None = None  # a check request that arrived while a call was open

    def call(self, name: str, *args, what: str, returns: str = "none", timeout_s: float | None = None,
             prepare: str | None = None, then: str | None = None, keep: str | None = None):
        """``name(*args)`` in the learner's kernel; its return value as plain JSON.

        ``name`` is a learner object or a kit step (``kit.<step>``,
        :mod:`autograder.kernel.routines`); arguments are plain JSON, :class:`Callback` s, or
        specs (:func:`named`, :func:`stashed`).
        ``keep``: keep the value on the other side under that key (for a later :func:`stashed`)
        instead of sending it back. Raises ``AssertionError`` with a one-line reason when the
        learner's code fails, hangs or returns the wrong kind of value.
        """
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        if self.names is not None and not name.startswith("kit.") and name not in self.names:
            # the check's bug (a grader fault, never the learner's): every learner name a check
            # calls is declared once, in the lab's spec, which also gives it its deadline guard
            raise LookupError(f"a check called {name!r}, which is not in the lab's learner_names "
                              f"({', '.join(self.names)})")
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

    @property
    def kit(self) -> Steps:
        """The kit steps on this side, as methods: ``side.kit.tasks_run(actor, "process", 3, what=...)``."""
        return Steps(self)

    def timed(self, name: str, *args, **kwargs) -> tuple[float, Any]:
        """(seconds on the grader's clock, value) of one :meth:`call`."""
        from .clock import perf_counter

        start = perf_counter()
        value = self.call(name, *args, **kwargs)
        return perf_counter() - start, value

    def _local(self, request: dict, callbacks: list[Callback]) -> dict:
        from .kernel import agent

        return agent.execute(request, lambda cid, a: callbacks[cid].fn(*a), self._namespace)

    def _exchange(self, request: dict, callbacks: list[Callback], wait_s: float) -> dict:
        """Send the request; run the callbacks it triggers; return the final reply."""
        from .clock import perf_counter

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
