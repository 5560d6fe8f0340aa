"""Lab 00's checks, called directly: the reference passes, each mistake fails its own check."""

from __future__ import annotations

import time

import pytest

from autograder.checks import lab00
from autograder.reference import lab00 as reference
from course import backend


def mean_no_sync(fn, items):
    times = []
    for _ in range(5):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return items / (sum(times) / len(times))


def median_no_warmup(fn, items):
    times = []
    for _ in range(5):
        backend.sync()
        t = time.perf_counter()
        fn()
        backend.sync()
        times.append(time.perf_counter() - t)
    return items / sorted(times)[2]


def median_no_sync(fn, items):
    fn()
    fn()
    times = []
    for _ in range(7):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    backend.sync()
    return items / sorted(times)[3]


@pytest.mark.parametrize("check", [lab00.throughput_known_cost, lab00.throughput_sync,
                                   lab00.throughput_warmup, lab00.throughput_outliers])
def test_reference_throughput_passes(check):
    check(reference.throughput)


def test_missing_sync_fails_only_the_sync_check():
    lab00.throughput_known_cost(median_no_sync)
    with pytest.raises(AssertionError, match="asynchronous workload.*call course.backend.sync"):
        lab00.throughput_sync(median_no_sync)
    backend.sync()


def test_missing_warmup_fails_the_warmup_check():
    with pytest.raises(AssertionError, match="slow start.*Discard warm-up calls"):
        lab00.throughput_warmup(median_no_warmup)


def test_mean_fails_the_outlier_check():
    with pytest.raises(AssertionError, match="slow outliers.*median"):
        lab00.throughput_outliers(mean_no_sync)


def test_hard_coded_rate_fails():
    truth = [lab00._make(s).items / lab00._make(s).seconds for s in (1, 2, 3, 4)]
    fake = 1.0 if min(truth) > 2 else 10 * max(truth)
    with pytest.raises(AssertionError, match="without running the workload"):
        lab00.throughput_known_cost(lambda fn, items: fake)
    with pytest.raises(AssertionError, match="you measured"):
        lab00.throughput_known_cost(lambda fn, items: [fn() for _ in range(3)] and fake)


def test_non_numeric_result_is_reported():
    with pytest.raises(AssertionError, match="expected items per second"):
        lab00.throughput_known_cost(lambda fn, items: (fn(), "fast")[1])


def test_batch_model_has_a_clear_optimum():
    model = lab00.BatchModel(5)
    rates = {n: n / model.seconds(n) for n in lab00.CANDIDATES}
    best = max(rates, key=rates.get)
    assert best == model.best
    runner_up = sorted(rates.values())[-2]
    assert runner_up <= 0.8 * rates[best]  # a 20 % gap: measurement noise cannot flip it


def test_batch_checks_pass_the_reference_and_fail_a_fixed_answer():
    lab00.batch_model(reference.best_batch_size)
    wrong = next(n for n in lab00.CANDIDATES if n != lab00.BatchModel(5).best)
    with pytest.raises(AssertionError, match=f"returned {wrong}; on this cost model"):
        lab00.batch_model(lambda run, candidates: wrong)
    lab00.batch_real_tier1(reference.best_batch_size)


def test_batch_real_rejects_a_size_not_offered():
    with pytest.raises(AssertionError, match="not one of"):
        lab00.batch_real_tier1(lambda run, candidates: 1000)


def test_ray_task_check(ray_local):
    import numpy as np
    import ray

    from course import kernels

    @ray.remote
    def right(seed, n):
        return kernels.process(kernels.make_batch(n, seed=seed))

    lab00.ray_task(lambda seed, n: right.remote(seed, n))
    with pytest.raises(AssertionError, match="not a Ray ObjectRef"):
        lab00.ray_task(lambda seed, n: kernels.process(kernels.make_batch(n, seed=seed)))
    with pytest.raises(AssertionError, match="checksum is not the reference"):
        lab00.ray_task(lambda seed, n: ray.put(np.zeros(n, dtype=np.float32)))


def test_live_check_reports_every_check(capsys):
    import autograder

    score = autograder.check(lab="00_measure", namespace={"throughput": reference.throughput})
    out = capsys.readouterr().out.splitlines()
    assert score == 8
    assert out[-1] == "score: 8/14"
    assert any(line.startswith("FAIL batch-model") and "not defined yet" in line for line in out)
