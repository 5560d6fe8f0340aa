"""Lab 01's grader-side checks, run in-process on learner objects given by name: the reference
passes, each mistake fails its own checks with its own reason, and forged results or jobs
get nothing. One Ray with the fleet's resources for the whole module."""

from __future__ import annotations

import dataclasses
import re
import sys
import time

import numpy as np
import pytest
import ray

from autograder.labs.lab01 import checks as lab01
from autograder.labs.lab01 import reference as reference
from autograder.grader.session.session import Session
from autograder.transport import Learner
from autograder.labs.lab01.instruments import ArmedGPU, receipt, seal
from course import backend, fleet, kernels

# The bad actor classes below live in this test module, which Ray's workers cannot import.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

SEED = 1717
REFERENCE = {"ImageWorker": reference.ImageWorker, "run_pool": reference.run_pool,
             "predict_throughput": reference.predict_throughput, "fit_overhead": reference.fit_overhead}


@pytest.fixture(scope="module", autouse=True)
def ray_fleet():
    from course import cluster

    cluster.stop()
    fleet.start()
    yield


def session(**learner) -> Session:
    """A grading session whose learner is the reference with ``learner``'s objects swapped in."""
    return Session(lab01.LAB, seed=SEED, learner=Learner(namespace={**REFERENCE, **learner}))


def verdicts(names, **learner) -> dict:
    s = session(**learner)
    return {n: s.run(n) for n in names}


def passes(names, **learner) -> None:
    for name, r in verdicts(names, **learner).items():
        assert r.passed, (name, r.message)


def fails(name: str, match: str, **learner) -> None:
    r = verdicts([name], **learner)[name]
    assert not r.passed and re.search(match, r.message), r.message


# ---------------------------------------------------------------- pure helpers (no Ray needed)

def test_model_and_fit_recover_a_known_overhead():
    t_o = 0.0007
    ns = [1, 2, 4, 8]
    assert reference.fit_overhead(ns, [1 / t_o] * 4) == pytest.approx(t_o)
    assert reference.predict_throughput(1, 0.0, t_o) == pytest.approx(1 / t_o)
    # linear while kernels dominate, 1 / t_overhead in the limit, half-efficiency at the knee
    assert reference.predict_throughput(2, 1.0, 1e-6) == pytest.approx(2.0, rel=1e-5)
    assert reference.predict_throughput(10**6, 0.01, t_o) == pytest.approx(1 / t_o, rel=0.02)
    knee = 0.01 / t_o
    assert reference.predict_throughput(knee, 0.01, t_o) == pytest.approx(0.5 * knee / 0.01)


def test_sweep_sizes():
    assert lab01.sweep_sizes(8) == [1, 2, 4, 8]
    assert lab01.sweep_sizes(12) == [1, 2, 4, 8, 12]
    assert lab01.sweep_sizes(1) == [1]


def test_jobs_are_seeded_and_an_armed_gpu_runs_only_sealed_jobs():
    a, b = fleet.jobs(5, 0.01, seed=3, jitter=0.005), fleet.jobs(5, 0.01, seed=3, jitter=0.005)
    assert a == b and all(0.005 <= j.seconds <= 0.015 for j in a)
    lesson = fleet.EmulatedGPU()
    start = time.perf_counter()
    assert lesson.process(fleet.Job(0, 0.02, 42)) == 42 and time.perf_counter() - start >= 0.02
    key = bytes(range(32))
    armed = ArmedGPU()
    with pytest.raises(ValueError, match="seal does not match"):
        armed.process(fleet.Job(0, 0.0, 42, seal(key, 42, 0.0)))  # not armed yet: runs nothing
    armed.arm(key.hex())
    with pytest.raises(RuntimeError, match="already armed"):
        armed.arm(bytes(32).hex())  # whoever arms it first (the grader) keeps it
    job = fleet.Job(0, 0.02, 42, seal(key, 42, 0.02))
    assert armed.process(job) == receipt(key, 42) != 42
    with pytest.raises(ValueError, match="seal does not match"):
        armed.process(dataclasses.replace(job, seconds=0.0))  # a shortened kernel
    with pytest.raises(ValueError, match="seal does not match"):
        armed.process(fleet.Job(0, 0.0, 42))  # an unsealed job


# ---------------------------------------------------------------- the actor

class WrongWorker(reference.ImageWorker):
    def process(self, batch):
        super().process(batch)
        return np.full(len(batch), 0.5, dtype=np.float32)  # hard-coded results


class ForgetfulWorker(reference.ImageWorker):
    def images_processed(self):
        return 0


class ColdWorker(reference.ImageWorker):
    """Pays a one-off cost on every call (here: 25 ms, like re-creating its state)."""

    def process(self, batch):
        time.sleep(0.025)
        return super().process(batch)


class BlankWorker:
    def __init__(self):
        raise NotImplementedError()


WORKER = ("worker-correct", "worker-state", "worker-tier1", "worker-tier2")
DRIVER = ("driver-correct", "driver-concurrency", "driver-tier1", "driver-tier2")
MODEL = ("model-short-kernel", "model-long-kernel")


def test_reference_passes_every_check():
    passes(WORKER + DRIVER + MODEL)


def test_wrong_results_fail_correctness_and_are_not_credited():
    r = verdicts(WORKER, ImageWorker=WrongWorker)
    assert re.search("wrong result for a batch of 1 images", r["worker-correct"].message)
    assert "not credited while the results are wrong" in r["worker-tier1"].message
    assert not r["worker-state"].passed


def test_stateless_worker_fails_state_only():
    r = verdicts(WORKER, ImageWorker=ForgetfulWorker)
    assert re.search(r"images_processed\(\) returned 0", r["worker-state"].message)
    assert r["worker-correct"].passed and r["worker-tier1"].passed


def test_cold_worker_fails_throughput_tiers():
    r = verdicts(WORKER, ImageWorker=ColdWorker)
    assert r["worker-correct"].passed
    assert re.search(r"x the rate of the reference actor.*needs 0.70x", r["worker-tier2"].message)


class CachingWorker(reference.ImageWorker):
    """Remembers results by content: a grader that reused its batches would be fooled."""

    def __init__(self):
        super().__init__()
        self.cache = {}

    def process(self, batch):
        key = hash(batch.tobytes())
        if key not in self.cache:
            time.sleep(0.05)
            self.cache[key] = super().process(batch)
        else:
            self.images += len(batch)
        return self.cache[key]


def test_a_caching_worker_gains_nothing_fresh_batches_every_round():
    r = verdicts(WORKER, ImageWorker=CachingWorker)
    assert r["worker-correct"].passed and not r["worker-tier1"].passed, r["worker-tier1"].message


def test_blank_worker_fails_to_start():
    fails("worker-correct", r"starting ImageWorker as a Ray actor is not implemented yet", ImageWorker=BlankWorker)


# ---------------------------------------------------------------- the driver

def loop_driver(actors, batches):
    return [ray.get(actors[i % len(actors)].process.remote(b)) for i, b in enumerate(batches)]


def completion_order_driver(actors, batches):
    refs = [actors[i % len(actors)].process.remote(b) for i, b in enumerate(batches)]
    out = []
    while refs:
        done, refs = ray.wait(refs, num_returns=1)
        out.append(ray.get(done[0]))
    return out


def test_ray_get_in_a_loop_is_named_and_loses_the_measured_points():
    r = verdicts(DRIVER + ("model-long-kernel",), run_pool=loop_driver)
    assert r["driver-correct"].passed
    assert re.search(r"only \d\.\d were busy.*ray.get in a loop", r["driver-concurrency"].message)
    assert "ray.get in a loop" in r["driver-tier1"].message and "ray.get in a loop" in r["driver-tier2"].message
    assert re.search(r"50 ms kernels.*driver reaches only", r["model-long-kernel"].message)


def test_results_out_of_order_fail_correctness():
    fails("driver-correct", "in a different order", run_pool=completion_order_driver)
    fails("driver-tier2", "in a different order", run_pool=completion_order_driver)


def test_refs_instead_of_results_fail():
    def lazy(actors, batches):
        return [actors[i % len(actors)].process.remote(b) for i, b in enumerate(batches)]

    fails("driver-correct", "returned .*ObjectRef.*expected a list of whole numbers", run_pool=lazy)


def test_blank_driver():
    def blank(actors, batches):
        raise NotImplementedError()

    fails("driver-correct", "not implemented yet", run_pool=blank)


def test_shortened_jobs_are_refused_by_the_grader_gpus():
    def shortcut(actors, batches):
        return reference.run_pool(actors, [dataclasses.replace(b, seconds=0.0) for b in batches])

    fails("driver-correct", "seal does not match", run_pool=shortcut)


def test_the_grader_gpus_cannot_be_entered_by_ray_call():
    def steal(actors, batches):
        key = bytes.fromhex(ray.get(actors[0].__ray_call__.remote(lambda self: self._key.hex())))
        return [receipt(key, b.token) for b in batches]

    fails("driver-correct", "has no attribute '__ray_call__'", run_pool=steal)


def test_tokens_instead_of_results_are_not_results():
    def echo(actors, batches):
        return [b.token for b in batches]  # what a lesson's emulated GPU would have returned

    fails("driver-correct", "0 of them results of these batches", run_pool=echo)


# ---------------------------------------------------------------- the model

def test_hard_coded_numbers_fail_the_model():
    fails("model-short-kernel", "synthetic trivial-call rates", fit_overhead=lambda n, r: 0.0008)
    fails("model-long-kernel", r"predicts 1,000 calls/s.*driver reaches only",
          predict_throughput=lambda n, t, o: 1000.0)


def test_model_must_return_a_number():
    fails("model-long-kernel", "predict_throughput.*returned None; expected a number",
          predict_throughput=lambda n, t, o: None)


def test_real_kernel_actor_runs_on_the_backend():
    [w] = fleet.start_actors(reference.ImageWorker, 1, options=fleet.device_options(reserve=False))
    try:
        out = ray.get(w.process.remote(kernels.make_batch(16, seed=4, device=False)))
        assert isinstance(out, np.ndarray) and kernels.matches(out, kernels.reference_checksum(16, seed=4))
        assert ray.get(w.images_processed.remote()) == 16
    finally:
        fleet.release([w])
    assert backend.name() in ("numpy", "cupy")
