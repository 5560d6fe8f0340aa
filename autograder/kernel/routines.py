"""Kit steps a grader may ask a kernel -- or the reference process -- to carry out, by name.

A request names them ``kit.<step>`` (see :mod:`autograder.kernel.agent`). They run where learner
code runs, so they decide nothing: they set things up (Ray actors of a class, seeded image
batches in Ray's object store), drive actors the same way on both sides, and hand back plain
values that the grader checks against its own inputs and times with its own clock. The same
steps run for the learner's objects in the kernel and for the reference's in the reference
process, so the two are measured alike.
"""

from __future__ import annotations

import base64

from .stash import STASH


def connect() -> None:
    """Start or join this lab's Ray (``RAY_ADDRESS``, when the grader set one): the fleet's resources."""
    from course import fleet

    fleet.start()


def address(start: str = "connect") -> str:
    """Start this lab's Ray with the kit step ``start`` (the reference process does); its address."""
    import ray

    STEPS[start]()
    return ray.get_runtime_context().gcs_address


def actors(cls, n: int) -> list:
    """``n`` actors of ``cls``, started and ready, holding (almost) no resources.

    Almost none, so that actors a notebook still holds cannot keep them from starting; the
    grader measures one actor at a time.
    """
    from course import fleet

    if isinstance(cls, type):  # a plain class: constructed here first, so its error reads plainly
        cls()
    connect()
    return fleet.start_actors(cls, int(n), options=fleet.device_options(reserve=False))


def batches(specs: list) -> list:
    """Seeded image batches, ``[(seed, n), ...]``, put in Ray's object store (refs, in order)."""
    import ray

    from course import kernels

    return [ray.put(kernels.make_batch(int(n), seed=int(seed), device=False)) for seed, n in specs]


def process_all(workers: list, refs: list) -> list:
    """``worker.process(batch)`` for every batch, round-robin over ``workers``, all submitted at once."""
    import ray

    return ray.get([workers[i % len(workers)].process.remote(b) for i, b in enumerate(refs)])


def method(workers: list, name: str) -> list:
    """Every worker's answer to its method ``name()``."""
    import ray

    return ray.get([getattr(w, str(name)).remote() for w in workers])


def calls(actor, name: str, arglists: list, through_restart: bool = False) -> list:
    """``actor.<name>(*args)`` for every ``args`` of ``arglists``, all submitted at once, in order.

    ``through_restart``: a call made while the actor restarts waits for it instead of failing
    (Ray's records can show the actor alive a moment before this caller's handle knows it).
    """
    import ray

    method = getattr(actor, str(name))
    if through_restart:
        method = method.options(max_task_retries=-1)
    return ray.get([method.remote(*args) for args in arglists])


def actor_id(actor) -> str:
    """An actor's id, by which the grader finds it in Ray's own records (its process, its state);
    of the first, for the list of actors :func:`actors` makes."""
    if isinstance(actor, list):
        actor = actor[0]
    return actor._actor_id.hex()


def tasks_run(actor_hex: str, method: str, at_least: int, timeout_s: float = 10.0) -> int:
    """How many ``<class>.<method>`` tasks Ray's own records show finished *in* actor ``actor_hex``:
    in its process (the pid in Ray's actor table), not merely submitted to it.

    The reference process runs this (it owns the lab's Ray), so the count comes from Ray, not
    from where learner code runs. Workers report task events about once a second; this waits
    up to ``timeout_s`` for ``at_least`` of them. Reads Ray's GCS through ``ray._private.state``:
    the public ``ray.util.state`` needs the dashboard, which the grader's Ray does not start.
    """
    import time

    from ray._private import state

    from course import cluster

    deadline = time.monotonic() + timeout_s
    actor = bytes.fromhex(str(actor_hex))
    while True:
        pid = cluster.gcs_actor(str(actor_hex)).get("Pid")
        done = set()
        for ev in state.state._get_all_task_events():
            info = ev.task_info
            if info.actor_id == actor and info.name.split(".")[-1] == str(method):
                up = ev.state_updates
                if up.worker_pid == pid and _finished(up):
                    done.add(ev.task_id)
        if len(done) >= int(at_least) or time.monotonic() > deadline:
            return len(done)
        time.sleep(0.5)


def _finished(update) -> bool:
    """Whether a task's state updates include FINISHED (Ray's ``TaskStatus``)."""
    from ray.core.generated import common_pb2

    return common_pb2.TaskStatus.FINISHED in update.state_ts_ns


def release(workers: list) -> None:
    """Kill actors and give their resources back."""
    from course import fleet

    fleet.release(workers if isinstance(workers, list) else [workers])


def forget(key: str) -> None:
    """Let go of what an earlier request kept under ``key`` (a job's actors go with it)."""
    import gc

    STASH.kept.pop(str(key), None)
    gc.collect()


def export(handle) -> str:
    """An actor handle as text the grader forwards to the kernel (``{"handle": ...}``), unread."""
    import ray

    return base64.b64encode(ray.cloudpickle.dumps(handle)).decode()


STEPS = {f.__name__: f for f in (connect, address, actors, batches, process_all, method, calls, actor_id,
                                 tasks_run, release, forget)}


def step(fn):
    """Decorator: make ``fn`` a kit step named ``kit.<fn name>`` (a lab's checks module adds its own)."""
    STEPS[fn.__name__] = fn
    return fn
