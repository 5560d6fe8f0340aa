"""The learner's side of the channel: runs what the grader asks for, returns plain data.

Everything in this module runs in the learner's kernel, where notebook code can replace any
of it -- so nothing here decides a grade. It only carries out a grader's request: call the
learner's object called ``name`` with plain arguments and *callbacks* (stand-ins whose calls
are carried out, and timed, by the grader), under a deadline, and convert what comes back
to plain JSON values. The grader checks those values against its own inputs and clocks.

A request (grader -> kernel)::

    {"op": "call", "name": "throughput", "what": "throughput(fn, items)",
     "args": [{"callback": 0, "deferred": true}, 37], "returns": "number",
     "timeout_s": 60, "prepare": null, "then": null}

The reply is ``{"op": "result", "value": ...}`` or ``{"op": "error", "message": ...}``.
While the learner's code runs, each call of a callback sends ``{"op": "callback", "id": 0,
"args": [...]}`` and waits for ``{"op": "return", "value": ...}``.
"""

from __future__ import annotations

import functools
import numbers
import types
from typing import Any, Callable

from . import harness

def _main_namespace() -> dict:
    import __main__

    return vars(__main__)


def _plain_arg(value):
    """A learner-supplied argument to a callback, as plain JSON (or TypeError)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(f"the grader's callables take plain numbers; got {type(value).__name__}")


def _proxy(spec, callback: Callable[[int, list], Any]):
    """A plain argument as is; a callback spec as a callable that asks the grader."""
    if not (isinstance(spec, dict) and "callback" in spec):
        return spec
    cid, deferred = spec["callback"], bool(spec.get("deferred"))

    def call(*args):
        plain = [_plain_arg(a) for a in args]
        if deferred:  # as a GPU launch: returns at once, the work runs at backend.sync()
            from course import backend

            backend.defer(lambda: callback(cid, plain))
            return None
        return callback(cid, plain)

    call.__name__ = call.__qualname__ = spec.get("name", "fn")
    return call


def convert(value, returns: str):
    """The learner's return value as plain JSON of the requested kind (ValueError if not)."""
    if returns == "none":
        return None
    if returns == "number":
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    if returns == "integer":
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Real) and float(value).is_integer():
            return int(value)
        raise ValueError
    if returns == "array":
        import numpy as np

        from course import backend

        array = np.asarray(backend.to_host(value), dtype=np.float64)
        return {"shape": list(array.shape), "data": array.ravel().tolist()}
    raise ValueError(f"unknown conversion {returns!r}")


def _then_ray_get(value, what: str, timeout_s: float):
    import ray

    if not isinstance(value, ray.ObjectRef):
        raise AssertionError(f"{what} returned {type(value).__name__}, not a Ray ObjectRef "
                             "(call a @ray.remote function with .remote())")
    return harness.call(ray.get, value, what=f"ray.get on the result of {what}", timeout_s=timeout_s)


def _stop_hung(namespace: dict, name: str, timeout_s: float) -> None:
    """After a hang, later cells calling ``name`` fail at once instead of hanging again."""

    def stopped(*args, **kwargs):  # noqa: ARG001
        raise RuntimeError(f"{name} was stopped by the grader after running past {timeout_s:g} s; "
                           "it is not run again (fix it and re-run its cell)")

    stopped.__autograder_guarded__ = True
    namespace[name] = stopped


def _guarded(namespace: dict, name: str, fn, timeout_s: float):
    """``fn`` under a deadline of its own when called outside a grader's request."""

    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        if harness.armed():  # called by the grader (or from a guarded call): that deadline governs
            return fn(*args, **kwargs)
        try:
            with harness.deadline(timeout_s):
                return fn(*args, **kwargs)
        except harness.Deadline:
            _stop_hung(namespace, name, timeout_s)
            raise RuntimeError(f"{name} ran past {timeout_s:g} s and was stopped by the grader; "
                               "it is not run again (fix it and re-run its cell)") from None

    guarded.__autograder_guarded__ = True
    return guarded


def guard(namespace: dict, names, timeout_s: float) -> None:
    """Put a deadline on the learner's functions called ``names`` (after each cell, in grading).

    A function that loops forever then costs one deadline in the first cell that calls it --
    a demonstration cell included -- and every later call fails at once, instead of each
    cell waiting for nbgrader's cell timeout.
    """
    for name in names:
        fn = namespace.get(name)
        if isinstance(fn, types.FunctionType) and not getattr(fn, "__autograder_guarded__", False):
            namespace[name] = _guarded(namespace, name, fn, timeout_s)


def execute(request: dict, callback: Callable[[int, list], Any], namespace: dict | None = None) -> dict:
    """Carry out one ``call`` request on the objects of ``namespace`` (default: the notebook's)."""
    name, what = str(request.get("name")), str(request.get("what") or request.get("name"))
    timeout_s = float(request.get("timeout_s", 60))
    returns = request.get("returns", "none")
    namespace = _main_namespace() if namespace is None else namespace
    if name not in namespace:
        return {"op": "error", "message": f"{name} is not defined yet: run its cell first"}
    fn = namespace[name]
    try:
        if request.get("prepare") == "ray":
            from course import cluster

            cluster.start()  # again: the notebook may have shut Ray down
        args = [_proxy(a, callback) for a in request.get("args", [])]
        value = harness.call(fn, *args, what=what, timeout_s=timeout_s)
        if request.get("then") == "ray_get":
            value = _then_ray_get(value, what, timeout_s)
    except AssertionError as exc:
        if harness.timed_out(fn):
            _stop_hung(namespace, name, timeout_s)
        return {"op": "error", "message": str(exc), "hung": harness.timed_out(fn)}
    except KeyboardInterrupt:  # the grader's interrupt, or the cell's time limit
        _stop_hung(namespace, name, timeout_s)
        return {"op": "error", "hung": True,
                "message": f"{what} did not finish within {timeout_s:g} s and was interrupted"}
    try:  # conversion may run the learner's __float__ or __array__: under a deadline too
        with harness.deadline(timeout_s):
            plain = convert(value, returns)
    except Exception:
        shown = harness.short_repr(value)
        return {"op": "error", "message": f"{what} returned {shown}; expected {_expected(returns)}"}
    return {"op": "result", "value": plain}


def _expected(returns: str) -> str:
    return {"number": "a number", "integer": "a whole number", "array": "an array of numbers",
            "none": "nothing"}.get(returns, returns)


# -- the kernel's end of a graded check ----------------------------------------------------

_conn = None


def _connection():
    """This kernel's connection to its grader (made on first use), or None when not graded."""
    global _conn
    if _conn is None or _conn.closed:
        from . import channel

        _conn = channel.connect()
    return _conn


def grade(name: str) -> None:
    """Ask the grader to run check ``name`` and serve its requests until it gives a verdict.

    What this cell shows (pass, or an AssertionError with the grader's reason) is only the
    kernel's copy of the verdict: the score the instructor records is the grader's own.
    Outside a grading run (no grader in the environment) the checks run in this kernel.
    """
    conn = _connection()
    if conn is None:
        from . import session

        result = session.local().run(name)
        if not result.passed:
            raise AssertionError(result.message)
        return
    from .channel import recv, send

    def callback(cid, args):
        send(conn, {"op": "callback", "id": cid, "args": args})
        reply = recv(conn)
        if reply.get("op") == "raise":
            raise RuntimeError(str(reply.get("message")))
        return reply.get("value")

    send(conn, {"op": "check", "name": name})
    while True:
        message = recv(conn)
        if message["op"] == "call":
            send(conn, execute(message, callback))
        elif message["op"] == "verdict" and message.get("name") == name:  # not a late one
            if message.get("passed"):
                return
            raise AssertionError(str(message.get("message")))
