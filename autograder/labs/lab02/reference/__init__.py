"""Reference answers for 02_restart_recovery: what the grader measures learners against."""

from __future__ import annotations

import json
import os
import time

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from course import faults


def recovery_latency(actor, kill):
    """Seconds from ``kill()`` to the first call answered by a *new* process of ``actor``.

    ``actor.ping()`` returns the pid of the process that answered. The old process may still
    answer right after the kill (``ray.kill`` returns before it is gone), so the pid is checked.
    """
    old = ray.get(actor.ping.remote())
    start = time.perf_counter()
    kill()
    while time.perf_counter() - start < 120:  # a deadline: an actor may never come back
        try:  # retries on this call: it waits for the restart instead of failing while it runs
            pid = ray.get(actor.ping.options(max_task_retries=-1).remote(), timeout=10)
        except (RayActorError, GetTimeoutError):
            time.sleep(0.005)
            continue
        if pid != old:
            return time.perf_counter() - start
        time.sleep(0.005)
    raise TimeoutError("the actor was not answered by a new process within 120 s")


@ray.remote
class CheckpointedAccumulator:
    """A running (count, total) that survives restarts: saved every ``every`` items to ``path``.

    The checkpoint is written to a temporary file and renamed over the old one, so a crash
    mid-write never leaves a half-written checkpoint behind.
    """

    def __init__(self, path, every):
        self.path, self.every = path, every
        self.count, self.total = 0, 0
        if os.path.exists(path):
            with open(path) as f:
                saved = json.load(f)
            self.count, self.total = saved["count"], saved["total"]

    def add(self, x):
        self.count += 1
        self.total += x
        if self.count % self.every == 0:
            tmp = f"{self.path}.tmp"
            with open(tmp, "w") as f:
                json.dump({"count": self.count, "total": self.total}, f)
            os.replace(tmp, self.path)
        return self.count

    def state(self):
        return self.count, self.total


class PipelineWorker:
    """Exactly-once effects from at-least-once delivery: retries on, updates keyed by seq.

    Whether an effect was applied is asked of the durable ledger, not of this actor's memory
    (which a restart wipes).
    """

    def __init__(self, ledger):
        self.ledger = ledger

    def process(self, seq, seed):
        value = faults.tiny_item(seed)
        if not ray.get(self.ledger.applied.remote(seq)):
            ray.get(self.ledger.add.remote(seq, value))
        return value


# an actor whose calls are retried (at-least-once delivery) and which restarts after any crash
PipelineWorker = ray.remote(max_restarts=-1, max_task_retries=-1)(PipelineWorker)
