"""Lab 02's fault injection and checks, called directly: the reference passes, each bad
implementation fails the right check with a message naming the guarantee that broke.

The checks run at reduced sizes here (fewer items and kills; same logic) to keep these fast.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import time

import pytest
import ray
from ray import cloudpickle

from autograder.labs.lab02 import checks as lab02
from autograder.labs.lab02 import reference as ref
from autograder.grader.session.session import Session
from autograder.transport import Learner
from course import faults

# Ray workers cannot import this test module: ship its classes by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture
def small(monkeypatch, ray_local):
    monkeypatch.setattr(lab02, "T", dataclasses.replace(
        lab02.T, chaos_items=240, chaos_kill_every=(70, 100), ckpt_items=120, ckpt_every=(10, 20),
        ckpt_kills=2))
    return lab02.T


def session(**learner) -> Session:
    return Session(lab02.LAB, seed=2024, learner=Learner(namespace=learner))


def passes(*names, **learner) -> Session:
    s = session(**learner)
    for name in names:
        r = s.run(name)
        assert r.passed, (name, r.message)
    return s


def fails(name: str, match: str, **learner) -> None:
    r = session(**learner).run(name)
    assert not r.passed and re.search(match, r.message), r.message


# --- course.faults without Ray ---------------------------------------------------------------

def test_summary_percentiles_and_cdf():
    s = faults.summary([1.0, 2.0, 3.0, 4.0, 5.0])
    assert s == {"p50": 3.0, "p95": pytest.approx(4.8), "max": 5.0, "n": 5}
    assert faults.cdf([3.0, 1.0, 2.0]) == ([1.0, 2.0, 3.0], [1 / 3, 2 / 3, 1.0])


def test_kubernetes_model_follows_documented_backoff():
    assert faults.crashloop_backoff(8) == [0, 10, 20, 40, 80, 160, 300, 300]  # the first restart is immediate
    assert faults.k8s_restart_model(1.5, 3) == [1.5, 11.5, 21.5]
    assert faults.NODE_FAILURE_TOLERATION_S == 300


def test_kill_points_are_spaced_as_asked():
    import random

    pts = faults.kill_points(1000, (120, 200), random.Random(3))
    gaps = [b - a for a, b in zip([0] + pts, pts)]
    assert pts and all(120 <= g <= 200 for g in gaps) and pts[-1] < 999


def test_cold_start_runs_a_fresh_process():
    (t,) = faults.cold_start("pass", repeats=1)
    assert 0 < t < 30


# --- course.faults with Ray ------------------------------------------------------------------

@ray.remote(max_restarts=-1, num_cpus=0)
class Pid:
    def __init__(self):
        self.n = 0

    def ping(self):
        self.n += 1
        return os.getpid(), self.n


def test_sigkill_restart_and_state_loss(ray_local):
    a = Pid.remote()
    ray.get([a.ping.remote() for _ in range(3)])
    r = faults.recovery_latency(a, "sigkill")
    assert r.old_pid != r.new_pid and 0 < r.seconds < 30
    assert ray.get(a.ping.remote()) == (r.new_pid, 1)  # constructor re-ran: state lost
    old = faults.actor_pid(a)
    assert faults.restart(a) > 0 and faults.actor_pid(a) != old
    ray.kill(a)


def test_dead_actor_is_reported_gone(ray_local):
    a = Pid.options(max_restarts=0).remote()
    pid, _ = faults.sigkill(a)
    t = time.perf_counter()
    with pytest.raises(faults.ActorGone, match="not restarted"):
        faults.wait_until_answers(a, old_pid=pid, timeout_s=20)
    assert time.perf_counter() - t < 15


# --- latency checks --------------------------------------------------------------------------

def test_reference_latency_passes(ray_local):
    passes("latency-sigkill", "latency-raykill", recovery_latency=ref.recovery_latency)


def test_latency_that_does_not_wait_fails(ray_local):
    def no_wait(actor, kill):
        kill()
        return 0.0

    fails("latency-sigkill", "before any call was answered by the new process", recovery_latency=no_wait)


def test_latency_padded_fails(ray_local):
    def padded(actor, kill):
        return ref.recovery_latency(actor, kill) + 5.0

    fails("latency-sigkill", "allowed up to", recovery_latency=padded)


def test_latency_that_is_not_a_number_fails(ray_local):
    def waits_then_nan(actor, kill):  # NaN slips past every "too low" / "too high" comparison
        ref.recovery_latency(actor, kill)
        return float("nan")

    fails("latency-sigkill", "not number", recovery_latency=waits_then_nan)


def test_latency_without_kill_fails(ray_local):
    fails("latency-raykill", "never called kill", recovery_latency=lambda actor, kill: 1.0)


def test_latency_blank_fails(ray_local):
    def blank(actor, kill):
        raise NotImplementedError()

    fails("latency-sigkill", "not implemented yet", recovery_latency=blank)


def test_the_grader_probe_cannot_be_entered_by_ray_call(ray_local):
    def sneaky(actor, kill):
        ray.get(actor.__ray_call__.remote(lambda self: setattr(self, "first_ping", 0.0)))
        return 0.0

    fails("latency-sigkill", "has no attribute '__ray_call__'", recovery_latency=sneaky)


# --- checkpoint checks -----------------------------------------------------------------------

@ray.remote
class NoCheckpoint:
    """State in memory only: a restart brings it back empty."""

    def __init__(self, path, every):
        self.count, self.total = 0, 0

    def add(self, x):
        self.count += 1
        self.total += x
        return self.count

    def state(self):
        return self.count, self.total


@ray.remote
class StaleTotal(NoCheckpoint.__ray_actor_class__):
    """Saves the count, but the total from before the last item: an inconsistent checkpoint."""

    def __init__(self, path, every):
        self.path, self.every, self.count, self.total = path, every, 0, 0
        if os.path.exists(path):
            self.count, self.total = json.load(open(path))

    def add(self, x):
        before = self.total
        self.count += 1
        self.total += x
        if self.count % self.every == 0:
            json.dump([self.count, before], open(self.path, "w"))
        return self.count


def test_reference_checkpoint_passes(small):
    passes("checkpoint-resume", "checkpoint-interval", CheckpointedAccumulator=ref.CheckpointedAccumulator)


def test_no_checkpoint_loses_both(small):
    s = session(CheckpointedAccumulator=NoCheckpoint)
    assert re.search("came back with 0 items.*state guarantee broken", s.run("checkpoint-resume").message)
    assert "more than one checkpoint interval" in s.run("checkpoint-interval").message


def test_inconsistent_checkpoint_is_caught(small):
    fails("checkpoint-resume", "checkpoint is inconsistent", CheckpointedAccumulator=StaleTotal)


def test_blank_constructor_is_named(small):
    @ray.remote
    class Blank(NoCheckpoint.__ray_actor_class__):
        def __init__(self, path, every):
            raise NotImplementedError()

    fails("checkpoint-resume", r"CheckpointedAccumulator.__init__ is not implemented yet",
          CheckpointedAccumulator=Blank)


def test_checkpoint_needs_an_actor_class(small):
    fails("checkpoint-resume", "not a Ray actor class", CheckpointedAccumulator=NoCheckpoint.__ray_actor_class__)


# --- chaos checks ----------------------------------------------------------------------------

class Naive:
    def __init__(self, ledger):
        self.ledger = ledger

    def process(self, seq, seed):
        value = faults.tiny_item(seed)
        ray.get(self.ledger.add.remote(seq, value))
        return value


class InMemoryDedup:
    """Idempotent only while the process lives: the set is lost with it."""

    def __init__(self, ledger):
        self.ledger, self.seen = ledger, set()

    def process(self, seq, seed):
        value = faults.tiny_item(seed)
        if seq not in self.seen:
            ray.get(self.ledger.add.remote(seq, value))
            self.seen.add(seq)
        return value


def test_reference_chaos_passes(small):
    s = passes("chaos-complete", "chaos-exactly-once", PipelineWorker=ref.PipelineWorker)
    report = lab02._chaos(s)[0]
    assert len(report.kills) >= 2 and not report.duplicates() and not report.missing()


def test_no_retries_is_at_most_once(small):
    cls = ray.remote(max_restarts=-1, max_task_retries=0)(ref.PipelineWorker.__ray_actor_class__)
    s = session(PipelineWorker=cls)
    assert re.search("items were lost.*at-most-once.*completion guarantee broken", s.run("chaos-complete").message)
    assert s.run("chaos-exactly-once").passed  # nothing ran twice: the lost calls are completion's business


def test_effects_never_applied_are_caught(small):
    class NoEffect(Naive):
        def process(self, seq, seed):
            return faults.tiny_item(seed)

    cls = ray.remote(max_restarts=-1, max_task_retries=-1)(NoEffect)
    s = session(PipelineWorker=cls)
    assert re.search("only 0 of .* planned kills happened", s.run("chaos-complete").message)
    assert re.search("effect never reached the ledger.*exactly-once broken", s.run("chaos-exactly-once").message)


def test_a_worker_whose_every_call_fails_earns_no_exactly_once(small):
    class Broken(Naive):  # or one that hangs and is stopped by the grader: nothing ever applied
        def process(self, seq, seed):
            raise RuntimeError("stopped by the grader")

    s = session(PipelineWorker=ray.remote(max_restarts=-1, max_task_retries=-1)(Broken))
    assert "completion guarantee broken" in s.run("chaos-complete").message
    assert re.search(r"only 0 of \d+ planned kills happened and 0 of .* exactly-once was not tested",
                     s.run("chaos-exactly-once").message)


def test_no_restarts_is_named(small):
    cls = ray.remote(max_restarts=0, max_task_retries=-1)(ref.PipelineWorker.__ray_actor_class__)
    fails("chaos-complete", "restarts are off", PipelineWorker=cls)


def test_in_memory_dedup_applies_twice(small):
    cls = ray.remote(max_restarts=-1, max_task_retries=-1)(InMemoryDedup)
    s = session(PipelineWorker=cls)
    assert s.run("chaos-complete").passed  # every item completes: at-least-once works ...
    assert re.search("applied more than once.*exactly-once broken", s.run("chaos-exactly-once").message)  # ... but twice


def test_chaos_needs_an_actor_class(small):
    fails("chaos-complete", "not a Ray actor class", PipelineWorker=Naive)
