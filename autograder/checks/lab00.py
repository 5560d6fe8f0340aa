"""Checks for 00_measure: the learner's throughput measurement and batch-size sweep.

The grader hands the learner's ``throughput(fn, items)`` workloads whose true cost it knows
because it times every call itself, from inside the workload, with its own clock: a plain
one, one that only finishes on ``course.backend.sync()`` (an emulated asynchronous launch,
as on a GPU), one that is slow for its first calls (warm-up), and one with seeded slow
outliers. Durations are drawn from a per-run seed (``AUTOGRADER_SEED`` fixes it), so a
number typed into the notebook cannot match.
"""

from __future__ import annotations

import math
import os
import random
import statistics

import numpy as np

from course import backend, bench, kernels

from .. import harness
from ..reference import lab00 as reference
from ..targets import LAB00 as T
from . import register

LAB = "00_measure"
SEED = int(os.environ.get("AUTOGRADER_SEED") or random.SystemRandom().randrange(2**31))
CANDIDATES = (8, 16, 32, 64, 128, 256)


def _rng(salt: int) -> random.Random:
    return random.Random(SEED * 1000 + salt)


class Workload:
    """A callable of known cost: each call "processes" ``items`` items by sleeping.

    It logs, with the grader's clock, how long the real work of every call took, so the true
    steady-state rate is measured, not assumed.
    """

    def __init__(self, items: int, seconds: float, *, deferred=False, warmup=(), outliers=0,
                 outlier_factor=1.0, seed=0):
        self.items, self.seconds, self.deferred = items, seconds, deferred
        self.warmup, self.outliers, self.outlier_factor = list(warmup), outliers, outlier_factor
        # Outliers fall on every `outliers`-th call from a seeded phase: any run of that many
        # consecutive calls holds exactly one, wherever a learner starts timing.
        self._phase = random.Random(seed).randrange(outliers) if outliers else 0
        self.calls = 0
        self.log: list[tuple[str, float]] = []  # (kind, seconds of work) per finished call

    def _work(self, kind: str, seconds: float) -> None:
        start = harness.perf_counter()
        harness.sleep(seconds)
        self.log.append((kind, harness.perf_counter() - start))

    def __call__(self):
        n, self.calls = self.calls, self.calls + 1
        if n < len(self.warmup):
            kind, seconds = "warmup", self.warmup[n]
        elif self.outliers and n % self.outliers == self._phase:
            kind, seconds = "outlier", self.seconds * self.outlier_factor
        else:
            kind, seconds = "steady", self.seconds
        if self.deferred:  # returns at once; the work runs at the next backend.sync()
            backend.defer(lambda: self._work(kind, seconds))
        else:
            self._work(kind, seconds)

    def true_rate(self) -> float | None:
        """Items per second in the steady state, from the grader's own timings (None if never run)."""
        steady = [s for kind, s in self.log if kind == "steady"]
        return self.items / statistics.median(steady) if steady else None


def _make(salt: int, **kw) -> Workload:
    rng = _rng(salt)
    return Workload(rng.randint(4, 64), rng.uniform(0.01, 0.025), seed=rng.randrange(2**31), **kw)


def _verify(throughput, workload: Workload, label: str, hint: str) -> None:
    got = harness.call(throughput, workload, workload.items, what="throughput(fn, items)",
                       timeout_s=T.call_timeout_s)
    backend.sync()  # finish anything the learner left queued before reading the log
    try:
        got = float(got)
    except (TypeError, ValueError):
        raise AssertionError(f"throughput returned {got!r}; expected items per second (a number)") from None
    truth = workload.true_rate()
    if truth is None:
        raise AssertionError(f"{label}: throughput returned {got:,.1f} without running the workload "
                             "through its steady state; nothing was measured")
    error = got / truth - 1 if math.isfinite(got) else math.inf
    if not abs(error) <= T.rel_tolerance:
        tampered = harness.clock_tampered()
        note = f" The notebook replaced {', '.join(tampered)}." if tampered else ""
        raise AssertionError(
            f"{label}: you measured {got:,.1f} items/s, the grader timed {truth:,.1f} items/s "
            f"({error:+.0%}, allowed ±{T.rel_tolerance:.0%}; seed {SEED}). {hint}{note}"
        )


@register(LAB, "throughput-known-cost", 2)
def throughput_known_cost(throughput):
    """A plain workload: the measurement must match the grader's own timing."""
    _verify(throughput, _make(1), "plain workload", "Time repeated calls and divide items by seconds.")


@register(LAB, "throughput-sync", 2)
def throughput_sync(throughput):
    """Work that only finishes on ``backend.sync()``, as GPU kernels do."""
    _verify(throughput, _make(2, deferred=True), "asynchronous workload",
            "If yours is far too high, the clock stopped before the work finished: "
            "call course.backend.sync() before reading it.")


@register(LAB, "throughput-warmup", 2)
def throughput_warmup(throughput):
    """The first calls are slow (compilation, caches); the steady state is what counts."""
    _verify(throughput, _make(3, warmup=T.warmup_calls), "workload with a slow start",
            "Discard warm-up calls before timing.")


@register(LAB, "throughput-outliers", 2)
def throughput_outliers(throughput):
    """Seeded slow outliers: the median resists them, the mean does not."""
    _verify(throughput, _make(4, outliers=T.outlier_every, outlier_factor=T.outlier_factor),
            "workload with slow outliers", "Report the median of several repeats, not the mean.")


class BatchModel:
    """A batch cost model with a known best batch size (a sleep standing in for a kernel).

    A call costs a fixed overhead plus a per-image cost, and the per-image cost quadruples
    past a seeded capacity (think: the batch no longer fits in cache or memory), so the
    best batch size is exactly that capacity.
    """

    def __init__(self, salt: int):
        rng = _rng(salt)
        self.best = rng.choice(CANDIDATES[1:4])
        self.overhead = rng.uniform(0.001, 0.002)
        self.per_item = self.overhead / self.best

    def seconds(self, n: int) -> float:
        extra = max(0, n - self.best)
        return self.overhead + min(n, self.best) * self.per_item + extra * 4 * self.per_item

    def __call__(self, n: int):
        harness.sleep(self.seconds(n))


@register(LAB, "batch-model", 2)
def batch_model(best_batch_size):
    """On a seeded cost model the sweep must find the known best batch size."""
    model = BatchModel(5)
    got = harness.call(best_batch_size, model, list(CANDIDATES), what="best_batch_size(run, candidates)",
                       timeout_s=T.call_timeout_s)
    if got != model.best:
        rates = {n: n / model.seconds(n) for n in (got, model.best) if n in CANDIDATES}
        raise AssertionError(
            f"best_batch_size returned {got!r}; on this cost model (seed {SEED}) the best of "
            f"{list(CANDIDATES)} is {model.best} ({rates.get(model.best, 0):,.0f} items/s"
            + (f" vs {rates[got]:,.0f} for yours)" if got in rates else ")")
        )


_real: dict = {}


def _real_sweep(best_batch_size) -> tuple:
    """The learner's choice on the real image kernel, re-measured against the grader's best:
    (choice, best, ratio). Measured once per learner function and shared by the tier checks.
    """

    def measure():
        batches = {n: kernels.make_batch(n, seed=SEED % 1000 + n) for n in CANDIDATES}

        def run(n):
            return kernels.process(batches[n])

        choice = harness.call(best_batch_size, run, list(CANDIDATES),
                              what="best_batch_size(run, candidates)", timeout_s=T.call_timeout_s)
        if choice not in CANDIDATES:
            raise AssertionError(f"best_batch_size returned {choice!r}, not one of {list(CANDIDATES)}")
        best = reference.best_batch_size(run, CANDIDATES)
        (fa, ia), (fb, ib) = reference.repeat_for(run, choice), reference.repeat_for(run, best)
        cmp = bench.compare(fa, fb, items_a=ia, items_b=ib, rounds=T.batch_rounds)
        return choice, best, cmp.ratio

    return harness.memo(_real, best_batch_size, measure)


def _batch_tier(best_batch_size, min_ratio: float) -> None:
    choice, best, ratio = _real_sweep(best_batch_size)
    if ratio < min_ratio:
        raise AssertionError(
            f"batch size {choice} runs the image kernel at {ratio:.2f}x the rate of the grader's "
            f"best ({best}), measured side by side; this tier needs {min_ratio:.2f}x"
        )


@register(LAB, "batch-real-tier1", 1)
def batch_real_tier1(best_batch_size):
    """Real kernel, re-measured: the learner's batch size reaches the first tier."""
    _batch_tier(best_batch_size, T.batch_tiers[0])


@register(LAB, "batch-real-tier2", 1)
def batch_real_tier2(best_batch_size):
    """Real kernel, re-measured: the learner's batch size reaches the top tier."""
    _batch_tier(best_batch_size, T.batch_tiers[1])


@register(LAB, "ray-task", 2)
def ray_task(submit_batch):
    """The learner's Ray task returns the right result for inputs the grader chooses."""
    import ray

    from course import cluster

    cluster.start()  # again: the notebook may have shut Ray down
    seed, n = _rng(6).randrange(10_000), _rng(7).randint(16, 96)
    ref = harness.call(submit_batch, seed, n, what="submit_batch(seed, n)", timeout_s=T.call_timeout_s)
    if not isinstance(ref, ray.ObjectRef):
        raise AssertionError(f"submit_batch returned {type(ref).__name__}, not a Ray ObjectRef "
                             "(call a @ray.remote function with .remote())")
    result = harness.call(ray.get, ref, what="ray.get on submit_batch's result", timeout_s=T.ray_timeout_s)
    expected = kernels.reference_checksum(n, seed)
    if not (hasattr(result, "shape") and np.shape(result) == (n,) and kernels.matches(result, expected)):
        raise AssertionError(
            f"submit_batch({seed}, {n}) gave a result whose checksum is not the reference's "
            f"(expected {n} values from kernels.process(kernels.make_batch({n}, seed={seed})))"
        )


def calibrate() -> list[str]:
    """The reference's batch choice against itself, and its error on a known-cost workload."""
    batches = {n: kernels.make_batch(n, seed=n) for n in CANDIDATES}

    def run(n):
        return kernels.process(batches[n])

    best = reference.best_batch_size(run, CANDIDATES)
    fn, items = reference.repeat_for(run, best)
    cmp = bench.compare(fn, fn, items_a=items, rounds=T.batch_rounds)
    low = min(cmp.ratios)
    workload = _make(1)
    error = reference.throughput(workload, workload.items) / workload.true_rate() - 1
    return [
        f"best batch {best}; reference vs itself {cmp} (lowest round {low:.2f}, top tier {T.batch_tiers[-1]})",
        f"reference throughput on a known-cost workload: {error:+.1%} (allowed ±{T.rel_tolerance:.0%})",
    ]
