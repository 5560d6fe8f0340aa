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
import os
import types
from typing import Any, Callable

from . import harness
from .stash import STASH

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
    """A callback spec as a callable that asks the grader."""
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


def _handle(blob: str):
    """An actor handle from its serialized form (the reference process made it)."""
    import base64

    import ray

    key = f"{ray.get_runtime_context().get_job_id()}:{blob}"
    if key not in STASH.handles:
        STASH.handles[key] = ray.cloudpickle.loads(base64.b64decode(blob))
    return STASH.handles[key]


def _arg(spec, callback: Callable[[int, list], Any], namespace: dict):
    """One argument of a request: plain JSON as is, or what a spec stands for.

    ``{"callback": i}`` a grader-side callable; ``{"learner": name}`` the namespace's object;
    ``{"stashed": key}`` a value an earlier request kept; ``{"handles": [...]}`` (or one
    ``{"handle": ...}``) actor handles of the grader's; ``{"jobs": [[index, seconds, token, seal], ...]}`` emulated-GPU jobs;
    ``{"batch_run": seed, "sizes": [...]}`` the image kernel on seeded batches (``course.kernels.BatchRun``).
    """
    if not isinstance(spec, dict):
        return spec
    if "callback" in spec:
        return _proxy(spec, callback)
    if "learner" in spec:
        name = str(spec["learner"])
        if name not in namespace:
            raise NameError(f"{name} is not defined yet: run its cell first")
        return namespace[name]
    if "stashed" in spec:
        return STASH.kept[str(spec["stashed"])]
    if "handles" in spec:
        from course import cluster

        cluster.start()
        return [_handle(str(b)) for b in spec["handles"]]
    if "handle" in spec:
        from course import cluster

        cluster.start()
        return _handle(str(spec["handle"]))
    if "jobs" in spec:
        from course import fleet

        return [fleet.Job(int(i), float(sec), int(tok), str(seal)) for i, sec, tok, seal in spec["jobs"]]
    if "batch_run" in spec:
        from course import kernels

        return kernels.BatchRun(int(spec["batch_run"]), [int(n) for n in spec["sizes"]])
    return spec


def _target(name: str, namespace: dict):
    """What a request names: a kit step (``kit.<step>``) or the namespace's object."""
    if name.startswith("kit."):
        from .routines import STEPS

        return functools.partial(STEPS[name[4:]])  # a fresh callable: a hang is not remembered across steps
    if name not in namespace:
        raise NameError(f"{name} is not defined yet: run its cell first")
    return namespace[name]


def convert(value, returns: str):
    """The learner's return value as plain JSON of the requested kind (ValueError if not)."""
    if returns == "none":
        return None
    if returns == "string":
        if not isinstance(value, str):
            raise ValueError
        return value
    if returns == "json":  # nested dicts / lists of plain values (e.g. a policy, a manifest)
        import json

        return json.loads(json.dumps(value, default=_json_number, allow_nan=False))
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
    if returns in ("integers", "arrays", "strings"):
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__"):
            raise ValueError
        if returns == "strings":
            if not all(isinstance(v, str) for v in value):
                raise ValueError
            return list(value)
        return [convert(v, returns[:-1]) for v in value]
    raise ValueError(f"unknown conversion {returns!r}")


def _json_number(value):
    """NumPy and other numbers as plain ones, for :func:`convert`'s ``json``; nothing else."""
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(f"{type(value).__name__} is not plain data")


def _then_ray_get(value, what: str, timeout_s: float):
    import ray

    if not isinstance(value, ray.ObjectRef):
        raise AssertionError(f"{what} returned {type(value).__name__}, not a Ray ObjectRef "
                             "(call a @ray.remote function with .remote())")
    return harness.call(ray.get, value, what=f"ray.get on the result of {what}", timeout_s=timeout_s)


def _stopped_before(what: str, timeout_s: float) -> RuntimeError:
    """What a later call of learner code that already hung raises, at once."""
    return RuntimeError(f"{what} was stopped by the grader after running past {timeout_s:g} s; "
                        "it is not run again (fix it and re-run its cell)")


def _stopped_now(what: str, timeout_s: float) -> RuntimeError:
    """What the call of learner code that just ran past its deadline raises."""
    return RuntimeError(f"{what} ran past {timeout_s:g} s and was stopped by the grader; "
                        "it is not run again (fix it and re-run its cell)")


def _stop_hung(namespace: dict, name: str, timeout_s: float) -> None:
    """After a hang, later cells calling ``name`` fail at once instead of hanging again."""
    if name.startswith("kit."):
        return

    def stopped(*args, **kwargs):  # noqa: ARG001
        raise _stopped_before(name, timeout_s)

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
            raise _stopped_now(name, timeout_s) from None

    guarded.__autograder_guarded__ = True
    return guarded


def _guarded_method(what: str, fn, timeout_s: float, marker: str):
    """Method ``fn`` of a learner class under a deadline, wherever it runs (kernel or Ray actor).

    A learner class runs in the kernel or, as a Ray actor, in a worker process of its own, so
    "already stopped once" is a file (``marker``) that every process running the class sees:
    after one hang, every later call fails at once, in any actor.
    """

    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        if os.path.exists(marker):
            raise _stopped_before(what, timeout_s)
        try:
            if harness.armed():  # a grader's request in the kernel: its deadline governs
                return fn(*args, **kwargs)
            with harness.deadline(timeout_s):  # in an actor, or a demonstration cell
                return fn(*args, **kwargs)
        except harness.Deadline:
            os.makedirs(os.path.dirname(marker), exist_ok=True)
            with open(marker, "w"):
                pass
            if harness.armed():
                raise
            raise _stopped_now(what, timeout_s) from None

    guarded.__autograder_guarded__ = True
    return guarded


def _learner_class(obj):
    """``(class to patch, class the learner wrote)`` for a plain class or a ``@ray.remote`` one.

    ``ray.remote`` subclasses the learner's class and copies each method into the subclass
    (wrapped for tracing) when it is decorated, so a decorated class is patched there.
    """
    if isinstance(obj, type):
        return obj, obj
    modified = getattr(getattr(obj, "__ray_metadata__", None), "modified_class", None)
    bases = getattr(modified, "__bases__", ())
    return (modified, bases[0]) if len(bases) == 1 and isinstance(bases[0], type) else None


def _guard_class(target: type, learner_cls: type, name: str, timeout_s: float, markers: str) -> None:
    """Give every method the learner wrote (``__init__`` included) a deadline, on ``target``."""
    if target.__dict__.get("__autograder_guarded__"):
        return
    for attr, fn in vars(learner_cls).items():
        if isinstance(fn, types.FunctionType) and (attr == "__init__" or not attr.startswith("__")):
            marker = os.path.join(markers, f"{name}.{attr}.{id(learner_cls):x}")  # a class defined again starts afresh
            setattr(target, attr, _guarded_method(f"{name}.{attr}", getattr(target, attr), timeout_s, marker))
    target.__autograder_guarded__ = True


def guard(namespace: dict, names, timeout_s: float, markers: str | None = None) -> None:
    """Put a deadline on the learner's functions and classes called ``names`` (after each cell, in grading).

    A function that loops forever then costs one deadline in the first cell that calls it --
    a demonstration cell included -- and every later call fails at once, instead of each
    cell waiting for nbgrader's cell timeout. A class's methods get the same, also when
    they run in a Ray actor (the class is guarded before Ray ships it to the actor's process;
    ``markers`` is the folder where a hang is recorded for every process to see).
    """
    markers = os.path.abspath(markers or ".autograder-hung")
    for name in names:
        obj = namespace.get(name)
        if isinstance(obj, types.FunctionType) and not getattr(obj, "__autograder_guarded__", False):
            namespace[name] = _guarded(namespace, name, obj, timeout_s)
        elif (classes := _learner_class(obj)) is not None:
            _guard_class(*classes, name, timeout_s, markers)


def execute(request: dict, callback: Callable[[int, list], Any], namespace: dict | None = None) -> dict:
    """Carry out one ``call`` request on the objects of ``namespace`` (default: the notebook's)."""
    name, what = str(request.get("name")), str(request.get("what") or request.get("name"))
    timeout_s = float(request.get("timeout_s", 60))
    returns = request.get("returns", "none")
    namespace = _main_namespace() if namespace is None else namespace
    try:
        fn = _target(name, namespace)
    except (NameError, KeyError) as exc:
        return {"op": "error", "message": str(exc).strip("'")}
    try:
        if request.get("prepare") == "ray":
            from course import cluster

            cluster.start()  # again: the notebook may have shut Ray down
        args = [_arg(a, callback, namespace) for a in request.get("args", [])]
        value = harness.call(fn, *args, what=what, timeout_s=timeout_s)
        if request.get("then") == "ray_get":
            value = _then_ray_get(value, what, timeout_s)
    except AssertionError as exc:
        if harness.timed_out(fn):
            _stop_hung(namespace, name, timeout_s)
        message = str(exc)
        if name.startswith("kit.") and message.startswith(f"{what} raised AssertionError: "):
            message = message[len(f"{what} raised AssertionError: "):]  # a kit step's own one-line reason
        return {"op": "error", "message": message, "hung": harness.timed_out(fn)}
    except KeyboardInterrupt:  # the grader's interrupt, or the cell's time limit
        _stop_hung(namespace, name, timeout_s)
        return {"op": "error", "hung": True,
                "message": f"{what} did not finish within {timeout_s:g} s and was interrupted"}
    except Exception as exc:  # setting up the arguments failed (e.g. Ray is down)
        return {"op": "error", "message": f"{what} could not start: {type(exc).__name__}: {exc}"[:500]}
    if request.get("keep"):
        STASH.kept[str(request["keep"])] = value
        return {"op": "result", "value": None}
    try:  # conversion may run the learner's __float__ or __array__: under a deadline too
        with harness.deadline(timeout_s):
            plain = convert(value, returns)
    except Exception:
        shown = harness.short_repr(value)
        return {"op": "error", "message": f"{what} returned {shown}; expected {_expected(returns)}"}
    return {"op": "result", "value": plain}


def _expected(returns: str) -> str:
    return {"number": "a number", "integer": "a whole number", "array": "an array of numbers",
            "integers": "a list of whole numbers", "arrays": "a list of arrays of numbers",
            "strings": "a list of strings", "string": "a string", "json": "plain data (dicts, lists, "
            "strings, numbers)", "none": "nothing"}.get(returns, returns)


# -- the kernel's end of a graded check ----------------------------------------------------

def connection():
    """This kernel's connection to its grader (made on first use), or None when not graded."""
    if STASH.conn is None or STASH.conn.closed:
        from . import channel

        STASH.conn = channel.connect()
    return STASH.conn


def callback_for(conn) -> Callable[[int, list], Any]:
    """How code on this side calls a grader's callback: ask over ``conn``, wait for the value."""
    from .channel import recv, send

    def callback(cid, args):
        send(conn, {"op": "callback", "id": cid, "args": args})
        reply = recv(conn)
        if reply.get("op") == "raise":
            raise RuntimeError(str(reply.get("message")))
        return reply.get("value")

    return callback


def grade(name: str) -> None:
    """Ask the grader to run check ``name`` and serve its requests until it gives a verdict.

    What this cell shows (pass, or an AssertionError with the grader's reason) is only the
    kernel's copy of the verdict: the score the instructor records is the grader's own.
    Only while graded (:func:`connection` is not None): outside a grading run,
    :func:`autograder.grade` runs the check in this kernel instead.
    """
    conn = connection()
    from .channel import recv, send

    callback = callback_for(conn)
    send(conn, {"op": "check", "name": name})
    while True:
        message = recv(conn)
        if message["op"] == "call":
            send(conn, execute(message, callback))
        elif message["op"] == "verdict" and message.get("name") == name:  # not a late one
            if message.get("passed"):
                return
            raise AssertionError(str(message.get("message")))
