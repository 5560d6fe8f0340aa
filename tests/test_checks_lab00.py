"""Lab 00's grader-side checks, run in-process on learner functions given by name: the
reference passes, each mistake fails its own check with its own reason."""

from __future__ import annotations

import re
import statistics
import time

import pytest

from autograder.labs.lab00 import checks as lab00
from autograder.labs.lab00 import reference as reference
from autograder.grader.session.session import Session
from autograder.transport import Learner
from course import backend

SEED = 4242


def verdict(name: str, **learner):
    """Check ``name`` of a fresh grading session whose learner defines ``learner``."""
    return Session(lab00.LAB, seed=SEED, learner=Learner(namespace=learner)).run(name)


def passes(name: str, **learner) -> None:
    result = verdict(name, **learner)
    assert result.passed, result.message


def fails(name: str, match: str, **learner) -> None:
    import re

    result = verdict(name, **learner)
    assert not result.passed and re.search(match, result.message), result.message


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


@pytest.mark.parametrize("check", ["throughput-known-cost", "throughput-sync", "throughput-warmup",
                                   "throughput-outliers"])
def test_reference_throughput_passes(check):
    passes(check, throughput=reference.throughput)


def test_missing_sync_fails_only_the_sync_check():
    passes("throughput-known-cost", throughput=median_no_sync)
    fails("throughput-sync", "asynchronous workload.*call course.backend.sync", throughput=median_no_sync)
    backend.sync()


def test_missing_warmup_fails_the_warmup_check():
    fails("throughput-warmup", "slow start.*Discard warm-up calls", throughput=median_no_warmup)


def test_mean_fails_the_outlier_check():
    fails("throughput-outliers", "slow outliers.*median", throughput=mean_no_sync)


def test_hard_coded_rate_fails():
    session = Session(lab00.LAB, seed=SEED)
    truth = [w.items / w.seconds for w in (lab00._workload(session, s) for s in (1, 2, 3, 4))]
    fake = 1.0 if min(truth) > 2 else 10 * max(truth)
    fails("throughput-known-cost", "without running the workload", throughput=lambda fn, items: fake)
    fails("throughput-known-cost", "you measured", throughput=lambda fn, items: [fn() for _ in range(3)] and fake)


def test_non_numeric_result_is_reported():
    fails("throughput-known-cost", "returned 'fast'; expected a number", throughput=lambda fn, items: (fn(), "fast")[1])


def test_a_forged_number_is_not_compared_by_its_own_methods():
    class Liar(float):
        def __eq__(self, other):
            return True

        def __float__(self):
            return 1e9

    fails("throughput-known-cost", "you measured 1,000,000,000", throughput=lambda fn, items: (fn(), Liar(1.0))[1])


def test_the_workload_carries_no_answer():
    seen = {}

    def snoop(fn, items):
        seen.update({k: v for k, v in vars(fn).items()} if hasattr(fn, "__dict__") else {})
        seen["closure"] = [c.cell_contents for c in (fn.__closure__ or ())]
        return reference.throughput(fn, items)

    passes("throughput-known-cost", throughput=snoop)
    assert not any(hasattr(v, "true_rate") or hasattr(v, "seconds") for v in seen["closure"])


def test_batch_model_has_a_clear_optimum():
    model = lab00.BatchModel(Session(lab00.LAB, seed=SEED), 5)
    rates = {n: n / model.seconds(n) for n in lab00.CANDIDATES}
    best = max(rates, key=rates.get)
    assert best == model.best
    runner_up = sorted(rates.values())[-2]
    assert runner_up <= 0.8 * rates[best]  # a 20 % gap: measurement noise cannot flip it


def test_batch_checks_pass_the_reference_and_fail_a_fixed_answer():
    passes("batch-model", best_batch_size=reference.best_batch_size)
    wrong = next(n for n in lab00.CANDIDATES if n != lab00.BatchModel(Session(lab00.LAB, seed=SEED), 5).best)
    fails("batch-model", f"returned {wrong}; on this cost model", best_batch_size=lambda run, candidates: wrong)
    tier1 = verdict("batch-real-tier1", best_batch_size=reference.best_batch_size)
    # a pass says what was measured: the learner sees their ratio, not only "passed"
    assert tier1.passed and re.fullmatch(r"measured \d+\.\d\dx the reference, side by side \(this tier needs "
                                         r"[\d.]+x\)", tier1.message), tier1.message


def test_batch_real_fails_a_choice_that_measures_nothing():
    # the first candidate, unmeasured: one image per call, a quarter of the best rate or less
    fails("batch-real-tier1", r"batch size 1 runs the image kernel at 0\.\d\dx the rate of the best",
          best_batch_size=lambda run, candidates: candidates[0])


def test_batch_real_rejects_a_size_not_offered():
    fails("batch-real-tier1", "not one of", best_batch_size=lambda run, candidates: 1000)
    fails("batch-model", "takes one of the candidates", best_batch_size=lambda run, candidates: run(1000))


def test_tiers_share_one_measurement():
    session = Session(lab00.LAB, seed=SEED, learner=Learner(namespace={"best_batch_size": reference.best_batch_size}))
    calls = []
    session.learner.call = lambda *a, **k: calls.append(a) or 64
    assert session.run("batch-real-tier1").name == "batch-real-tier1"
    session.run("batch-real-tier2")
    assert len(calls) == 1


def test_ray_task_check(ray_local):
    import numpy as np
    import ray

    from course import kernels

    @ray.remote
    def right(seed, n):
        return kernels.process(kernels.make_batch(n, seed=seed))

    passes("ray-task", submit_batch=lambda seed, n: right.remote(seed, n))
    fails("ray-task", "not a Ray ObjectRef",
          submit_batch=lambda seed, n: kernels.process(kernels.make_batch(n, seed=seed)))
    fails("ray-task", "checksum is not the reference",
          submit_batch=lambda seed, n: ray.put(np.zeros(n, dtype=np.float32)))


def test_live_check_reports_every_check(capsys):
    import autograder

    score = autograder.check(lab="00_measure", namespace={"throughput": reference.throughput})
    out = capsys.readouterr().out.splitlines()
    assert score == 8
    assert out[-1] == "score: 8/14"
    assert any(line.startswith("FAIL batch-model") and "not defined yet" in line for line in out)


def test_the_true_rate_counts_the_round_trip_between_calls_up_to_half_a_calls_work():
    """What the learner's clock sees of a stand-in call is its work plus the kernel-grader round
    trip; the grader's truth counts that gap, but no more than half the work, so that pausing
    between calls cannot move the truth where a number typed in without measuring lands."""
    quick, paused = lab00.Workload(10, 0.02), lab00.Workload(10, 0.02)
    for _ in range(5):
        quick()
        time.sleep(0.005)  # a round trip
    for _ in range(5):
        paused()
        time.sleep(0.2)    # a learner's pause, ten times the work
    work = [seconds for _, seconds in quick.log]
    assert 10 / (1.5 * max(work)) <= quick.true_rate() <= 10 / 0.0245  # work (≥ 20 ms) plus the gap (≥ 4.5 ms)
    work = [seconds for _, seconds in paused.log]
    # half the work, no more (the last call has no gap after it, so the median moves a little:
    # a CI run read 331.53 against 331.28 items/s when this compared exactly)
    assert paused.true_rate() == pytest.approx(10 / (1.5 * statistics.median(work)), rel=0.05)
    assert paused.true_rate() > 10 / (2 * max(work))  # the 200 ms pause is not counted
