"""Lab 01's checks called directly: the reference passes, each bad implementation fails the
right checks with the right message. One Ray with the emulated fleet for the whole module."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest
import ray

from autograder.checks import lab01
from autograder.reference import lab01 as reference
from course import backend, fleet, kernels

# The bad actor classes below live in this test module, which Ray's workers cannot import.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def ray_fleet():
    fleet.start()
    fleet.emulated()
    yield
    fleet.release(fleet.emulated())


def fails(check, *args, match: str):
    with pytest.raises(AssertionError, match=match):
        check(*args)


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


def test_jobs_are_seeded_and_emulated_gpu_logs_its_work():
    a, b = fleet.jobs(5, 0.01, seed=3, jitter=0.005), fleet.jobs(5, 0.01, seed=3, jitter=0.005)
    assert a == b and all(0.005 <= j.seconds <= 0.015 for j in a)
    gpu = fleet.EmulatedGPU()
    start = time.perf_counter()
    assert gpu.process(fleet.Job(0, 0.02, 42)) == 42
    assert time.perf_counter() - start >= 0.02
    [(token, busy)] = gpu.drain_log()
    assert token == 42 and busy >= 0.02 and gpu.drain_log() == []
    assert fleet.concurrency([[(1, 0.5)], [(2, 0.5)]], 0.5) == pytest.approx(2.0)


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


@pytest.mark.usefixtures("ray_fleet")
def test_reference_worker_passes():
    for check in (lab01.worker_correct, lab01.worker_state, lab01.worker_tier1, lab01.worker_tier2):
        check(reference.ImageWorker)


@pytest.mark.usefixtures("ray_fleet")
def test_wrong_results_fail_correctness_and_are_not_credited():
    fails(lab01.worker_correct, WrongWorker, match="wrong result for a batch of 1 images")
    fails(lab01.worker_tier1, WrongWorker, match="not credited while the results are wrong")
    lab01.worker_state(WrongWorker)  # it does count


@pytest.mark.usefixtures("ray_fleet")
def test_stateless_worker_fails_state_only():
    fails(lab01.worker_state, ForgetfulWorker, match=r"images_processed\(\) returned 0")
    lab01.worker_correct(ForgetfulWorker)


@pytest.mark.usefixtures("ray_fleet")
def test_cold_worker_fails_throughput_tiers():
    lab01.worker_correct(ColdWorker)
    fails(lab01.worker_tier2, ColdWorker, match=r"x the rate of the reference actor.*needs 0.70x")


@pytest.mark.usefixtures("ray_fleet")
def test_blank_worker_fails_to_start():
    fails(lab01.worker_correct, BlankWorker, match=r"ImageWorker\(\) is not implemented yet")


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


@pytest.mark.usefixtures("ray_fleet")
def test_reference_driver_passes():
    for check in (lab01.driver_correct, lab01.driver_concurrency, lab01.driver_tier1, lab01.driver_tier2):
        check(reference.run_pool)


@pytest.mark.usefixtures("ray_fleet")
def test_ray_get_in_a_loop_is_named_and_loses_the_measured_points():
    lab01.driver_correct(loop_driver)
    fails(lab01.driver_concurrency, loop_driver, match=r"only \d\.\d were busy.*ray.get in a loop")
    fails(lab01.driver_tier1, loop_driver, match=r"ray.get in a loop")
    fails(lab01.driver_tier2, loop_driver, match=r"ray.get in a loop")
    fails(lab01.model_long_kernel, loop_driver, reference.predict_throughput, reference.fit_overhead,
          match=r"50 ms kernels.*driver reaches only")


@pytest.mark.usefixtures("ray_fleet")
def test_results_out_of_order_fail_correctness():
    fails(lab01.driver_correct, completion_order_driver, match="in batch order")
    fails(lab01.driver_tier2, completion_order_driver, match="in batch order")


@pytest.mark.usefixtures("ray_fleet")
def test_refs_instead_of_results_fail():
    def lazy(actors, batches):
        return [actors[i % len(actors)].process.remote(b) for i, b in enumerate(batches)]

    fails(lab01.driver_correct, lazy, match="returned ObjectRefs")


@pytest.mark.usefixtures("ray_fleet")
def test_blank_driver():
    def blank(actors, batches):
        raise NotImplementedError()

    fails(lab01.driver_correct, blank, match="not implemented yet")


# ---------------------------------------------------------------- the model

@pytest.mark.usefixtures("ray_fleet")
def test_reference_model_passes_both_kernels():
    lab01.model_short_kernel(reference.run_pool, reference.predict_throughput, reference.fit_overhead)
    lab01.model_long_kernel(reference.run_pool, reference.predict_throughput, reference.fit_overhead)


@pytest.mark.usefixtures("ray_fleet")
def test_hard_coded_numbers_fail_the_model():
    def fit(n_actors, throughputs):
        return 0.0008

    fails(lab01.model_short_kernel, reference.run_pool, reference.predict_throughput, fit,
          match="synthetic trivial-call rates")

    def constant(n_actors, t_kernel, t_overhead):
        return 1000.0

    fails(lab01.model_long_kernel, reference.run_pool, constant, reference.fit_overhead,
          match=r"predicts 1,000 calls/s.*driver reaches only")


@pytest.mark.usefixtures("ray_fleet")
def test_model_must_return_a_number():
    fails(lab01.model_long_kernel, reference.run_pool, lambda n, t, o: None, reference.fit_overhead,
          match="predict_throughput returned None")


@pytest.mark.usefixtures("ray_fleet")
def test_real_kernel_actor_runs_on_the_backend():
    [w] = fleet.start_actors(reference.ImageWorker, 1, options=fleet.device_options(reserve=False))
    try:
        out = ray.get(w.process.remote(kernels.make_batch(16, seed=4, device=False)))
        assert isinstance(out, np.ndarray) and kernels.matches(out, kernels.reference_checksum(16, seed=4))
        assert ray.get(w.images_processed.remote()) == 16
    finally:
        fleet.release([w])
    assert backend.name() in ("numpy", "cupy")
