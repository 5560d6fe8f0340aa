"""02_restart_recovery's instruments (see :mod:`autograder.labs.instruments`): the grader's probe,
which times recoveries, and its ledger, the ground truth of the chaos run; and the wait for a
learner's actor to come back, read from Ray's records.
"""

from __future__ import annotations

import os
import time

import ray

from course import cluster, faults

from ..instruments import ClosedActor

# Captured at import, like the grader's clocks.
_clock = time.perf_counter
_sleep = time.sleep


class Probe(ClosedActor):
    """A grader's actor to time recoveries with: ``ping()`` returns its pid; each process notes,
    on the machine's monotonic clock, when it was constructed and when it was first pinged."""

    def __init__(self):
        self.born = time.monotonic()
        self.first_ping = None

    def ping(self):
        if self.first_ping is None:
            self.first_ping = time.monotonic()
        return os.getpid()

    def info(self):
        return os.getpid(), self.born, self.first_ping


@ray.remote(num_cpus=0, max_restarts=0)
class Ledger(faults.LedgerBook, ClosedActor):
    """The grader's ledger: the lesson's (:class:`course.faults.LedgerBook`), closed -- learner
    code it is handed to has no ``__ray_call__`` to rewrite its log with."""


def wait_restarted(actor_id: str, old_pid: int, *, timeout_s: float = 60.0, poll_s: float = 0.01) -> int:
    """The pid of the actor's new process, once Ray's records show it alive in one.

    Read from Ray's actor table (:func:`course.cluster.gcs_actor`), not from the actor.
    Raises :class:`course.faults.ActorGone` when it is dead for good or not back within ``timeout_s``.
    """
    deadline = _clock() + timeout_s
    while _clock() < deadline:
        record = cluster.gcs_actor(actor_id)
        if record.get("State") == "DEAD":
            raise faults.ActorGone("the actor died and was not restarted (restarts are off: max_restarts=0)")
        if record.get("State") == "ALIVE" and record.get("Pid") not in (None, 0, old_pid):
            return int(record["Pid"])
        _sleep(poll_s)
    raise faults.ActorGone(f"the actor was not alive in a new process within {timeout_s:g} s")
