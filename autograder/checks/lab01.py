"""Checks for 01_actor_scaling: the learner's image actor, pipelined driver and scaling model.

Everything is measured by the grader with its own actors and clock:

* the learner's ``ImageWorker`` runs seeded batches (checksums against the host reference),
  counts its images across calls, and is timed side by side with the reference actor;
* the learner's ``run_pool(actors, batches)`` drives the grader's emulated GPUs
  (:class:`course.fleet.EmulatedGPU`: a sleep of known length standing in for a kernel,
  logging from inside the actor how long it was busy). From those logs the grader knows how
  many GPUs were busy on average -- about 1 for a driver that calls ``ray.get`` in a loop;
* the learner's ``fit_overhead`` must recover a seeded overhead from synthetic data, is then
  fitted to the grader's own trivial-call sweep of the learner's driver, and
  ``predict_throughput`` must predict the driver's measured rate at two kernel durations.

Seeds are drawn per run (``AUTOGRADER_SEED`` fixes them), so typed-in numbers cannot match.
"""

from __future__ import annotations

import math
import os
import random
import statistics

import numpy as np
import ray

from course import fleet, kernels

from .. import harness
from ..reference import lab01 as reference
from ..targets import LAB01 as T
from . import register

LAB = "01_actor_scaling"
SEED = int(os.environ.get("AUTOGRADER_SEED") or random.SystemRandom().randrange(2**31))
ANTI_PATTERN = ("this is the 'ray.get in a loop' anti-pattern (Ray docs: \"Calling ray.get in a loop "
                "harms parallelism\"): submit work to every actor first, then collect results as they "
                "finish with ray.wait")


def _rng(salt: int) -> random.Random:
    return random.Random(SEED * 1000 + salt)


def _interleave(a, b, rounds: int, stop_below: float = 0.0) -> float:
    """A's best rate over B's best rate, from ``rounds`` interleaved runs (A B, B A, ...).

    ``a()`` and ``b()`` each return a rate they timed themselves, so each side times only the
    call being compared (the grader's checks of the results and reads of the actors' logs
    happen outside the clock). Noise on a shared machine only ever slows a run down, so the
    fastest of several interleaved runs is each side's best estimate of its speed. When the
    warm-up round's ratio is below ``stop_below`` (far under every tier), it is returned at
    once: a slow submission is not timed over and over.
    """
    first = a() / b()  # warm-up
    if first < stop_below:
        return first
    rates_a, rates_b = [], []
    for r in range(rounds):
        if r % 2 == 0:
            rates_a.append(a())
            rates_b.append(b())
        else:
            rates_b.append(b())
            rates_a.append(a())
    return max(rates_a) / max(rates_b)


def _timed(fn, *args, **kwargs) -> tuple[float, object]:
    """(seconds, result) of one call, on the grader's clock."""
    start = harness.perf_counter()
    out = fn(*args, **kwargs)
    return harness.perf_counter() - start, out


# ---------------------------------------------------------------------------- the actor

_worker: dict = {}


def _check_outputs(results, batches, what: str) -> None:
    for batch, out, seed in _pairs(results, batches):
        n = batch.shape[0]
        if not (hasattr(out, "shape") and np.shape(out) == (n,) and kernels.matches(out, kernels.reference_checksum(n, seed))):
            got = np.shape(out) if hasattr(out, "shape") else type(out).__name__
            raise AssertionError(
                f"{what} gave a wrong result for a batch of {n} images (seed {seed}): expected {n} float32 "
                f"values matching kernels.process(batch) (checksum), got {got}"
            )


def _pairs(results, batches):
    if not isinstance(results, (list, tuple)) or len(results) != len(batches):
        raise AssertionError(f"expected {len(batches)} results, got {type(results).__name__} "
                             f"of length {len(results) if hasattr(results, '__len__') else '?'}")
    for (seed, batch), out in zip(batches, results):
        yield batch, out, seed


def _start_worker(ImageWorker, opts):
    return harness.call(fleet.start_actors, ImageWorker, 1, options=opts, timeout_s=T.start_timeout_s + 10,
                        what="starting ImageWorker as a Ray actor")[0]


def _measure_worker(ImageWorker):
    """(wrong-results error or None, (count, expected count), throughput ratio or None).

    Correctness and state are checked on one actor; throughput on a fresh learner actor and
    a fresh reference actor started the same way, so that neither has a history the other
    lacks (an actor's speed depends on it: the memory allocator adapts to what it has seen).
    """
    fleet.start()
    opts = fleet.device_options(reserve=False)
    if isinstance(ImageWorker, type):  # a plain class: construct it here first, for a clear message
        harness.call(ImageWorker, what="ImageWorker()", timeout_s=T.call_timeout_s)
    mine = _start_worker(ImageWorker, opts)
    try:
        rng = _rng(1)
        sizes = [1, rng.randint(5, 40), T.worker_batch_size]
        seeds = [rng.randrange(10_000) for _ in sizes]
        checked = [(s, kernels.make_batch(n, seed=s, device=False)) for s, n in zip(seeds, sizes)]
        outs = [harness.call(ray.get, mine.process.remote(b), what="ImageWorker.process(batch)",
                             timeout_s=T.call_timeout_s) for _, b in checked]
        correct = None
        try:
            _check_outputs(outs, checked, "ImageWorker.process")
        except AssertionError as exc:
            correct = exc
        count = harness.call(ray.get, mine.images_processed.remote(), what="ImageWorker.images_processed()",
                             timeout_s=T.call_timeout_s) if hasattr(mine, "images_processed") else None
    finally:
        fleet.release([mine])
    state = (count, sum(sizes))
    if correct is not None:
        return correct, state, None
    timed = [(s, kernels.make_batch(T.worker_batch_size, seed=s, device=False))
             for s in (rng.randrange(10_000) for _ in range(T.worker_batches))]
    refs = [ray.put(b) for _, b in timed]
    mine = _start_worker(ImageWorker, opts)
    ref = fleet.start_actors(reference.ImageWorker, 1, options=opts, timeout_s=T.start_timeout_s)[0]
    try:
        def learner():
            wall, out = _timed(harness.call, reference.run_pool, [mine], refs, what="ImageWorker.process",
                               timeout_s=T.call_timeout_s)
            _check_outputs(out, timed, "ImageWorker.process")
            return 1 / wall

        def grader():
            return 1 / _timed(reference.run_pool, [ref], refs)[0]

        ratio = _interleave(learner, grader, T.worker_rounds, stop_below=T.worker_tiers[0] / 2)
    finally:
        fleet.release([mine, ref])
    return None, state, ratio


def _worker_result(ImageWorker):
    return harness.memo(_worker, ImageWorker, lambda: _measure_worker(ImageWorker))


@register(LAB, "worker-correct", 2)
def worker_correct(ImageWorker):
    """The learner's actor returns the kernel's per-image results for seeded batches."""
    correct, _, _ = _worker_result(ImageWorker)
    if correct is not None:
        raise correct


@register(LAB, "worker-state", 1)
def worker_state(ImageWorker):
    """The actor keeps state between calls: it counts every image it has processed."""
    correct, (count, expected), _ = _worker_result(ImageWorker)
    if count is None:
        raise AssertionError("ImageWorker has no images_processed() method")
    if count != expected:
        raise AssertionError(f"after the grader's calls (batches of {expected} images in all) "
                             f"images_processed() returned {count!r}: keep a running count in the actor")


def _worker_tier(ImageWorker, min_ratio: float) -> None:
    correct, _, ratio = _worker_result(ImageWorker)
    if correct is not None:
        raise AssertionError(f"throughput is not credited while the results are wrong ({correct})")
    if ratio < min_ratio:
        raise AssertionError(
            f"your actor processes images at {ratio:.2f}x the rate of the reference actor, measured side "
            f"by side on {T.worker_batches} batches of {T.worker_batch_size}; this tier needs {min_ratio:.2f}x "
            "(do one-off work such as warm-up in __init__, not in every call)"
        )


@register(LAB, "worker-tier1", 1)
def worker_tier1(ImageWorker):
    _worker_tier(ImageWorker, T.worker_tiers[0])


@register(LAB, "worker-tier2", 1)
def worker_tier2(ImageWorker):
    _worker_tier(ImageWorker, T.worker_tiers[1])


# ---------------------------------------------------------------------------- the driver

def _fleet() -> list:
    fleet.start()
    try:
        return fleet.emulated(timeout_s=T.start_timeout_s)
    except Exception as exc:
        raise AssertionError(f"the grader could not start its emulated GPUs ({exc}); release the actors "
                             "your notebook holds (fleet.release) and run the check again") from None


def _drive(run_pool, actors, jobs) -> tuple[float, float]:
    """Run the learner's driver once over ``jobs``; check it; return (calls/s, GPUs busy on average)."""
    fleet.drain(actors)
    start = harness.perf_counter()
    out = harness.call(run_pool, actors, jobs, what="run_pool(actors, batches)", timeout_s=T.call_timeout_s)
    wall = harness.perf_counter() - start
    logs = fleet.drain(actors)
    if isinstance(out, (list, tuple)) and out and isinstance(out[0], ray.ObjectRef):
        raise AssertionError("run_pool returned ObjectRefs: return the results themselves (ray.get them)")
    expected = [j.token for j in jobs]
    try:
        got = [int(x) for x in out]
    except Exception:
        got = None
    if got != expected:
        n = len(out) if hasattr(out, "__len__") else "?"
        raise AssertionError(f"run_pool returned {n} results for {len(jobs)} batches, not each batch's "
                             "result in batch order")
    ran = sorted(t for log in logs for t, _ in log)
    if ran != sorted(expected):
        raise AssertionError(f"the emulated GPUs ran {len(ran)} calls for {len(jobs)} batches: "
                             "process every batch exactly once")
    return len(jobs) / wall, fleet.concurrency(logs, wall)


_driver: dict = {}


def _measure_driver(run_pool):
    actors = _fleet()
    n = len(actors)
    _drive(run_pool, actors, fleet.jobs(3 * n + 1, T.short_kernel_s, seed=_rng(2).randrange(2**31),
                                        jitter=T.short_kernel_s))
    jobs = fleet.jobs(T.driver_jobs_per_actor * n, T.long_kernel_s, seed=_rng(3).randrange(2**31))
    busy = []

    def learner():
        rate, b = _drive(run_pool, actors, jobs)
        busy.append(b)
        return rate

    def grader():
        return len(jobs) / _timed(reference.run_pool, actors, jobs)[0]

    ratio = _interleave(learner, grader, T.driver_rounds, stop_below=T.driver_tiers[0] / 2)
    return n, ratio, statistics.median(busy)


def _driver_result(run_pool):
    return harness.memo(_driver, run_pool, lambda: _measure_driver(run_pool))


@register(LAB, "driver-correct", 2)
def driver_correct(run_pool):
    """run_pool returns every batch's result, in order, each batch processed once."""
    _driver_result(run_pool)


@register(LAB, "driver-concurrency", 2)
def driver_concurrency(run_pool):
    """The driver keeps the fleet busy (measured from inside the grader's emulated GPUs)."""
    n, _, busy = _driver_result(run_pool)
    if busy < T.min_busy_fraction * n:
        raise AssertionError(
            f"while run_pool drove {n} emulated GPUs ({T.long_kernel_s * 1e3:g} ms kernels), on average only "
            f"{busy:.1f} were busy (needs ≥ {T.min_busy_fraction * n:g}): {ANTI_PATTERN}"
        )


def _driver_tier(run_pool, min_ratio: float) -> None:
    n, ratio, busy = _driver_result(run_pool)
    if ratio < min_ratio:
        hint = ANTI_PATTERN if busy < T.min_busy_fraction * n else "keep every actor's queue non-empty"
        raise AssertionError(
            f"run_pool drives {n} emulated GPUs at {ratio:.2f}x the reference driver's rate, measured side "
            f"by side ({T.long_kernel_s * 1e3:g} ms kernels, {busy:.1f} GPUs busy on average); this tier needs "
            f"{min_ratio:.2f}x: {hint}"
        )


@register(LAB, "driver-tier1", 1)
def driver_tier1(run_pool):
    _driver_tier(run_pool, T.driver_tiers[0])


@register(LAB, "driver-tier2", 1)
def driver_tier2(run_pool):
    _driver_tier(run_pool, T.driver_tiers[1])


# ---------------------------------------------------------------------------- the model

def sweep_sizes(n: int) -> list[int]:
    """Actor counts of a sweep up to ``n``: 1, 2, 4, ... and ``n``."""
    out, k = [], 1
    while k < n:
        out.append(k)
        k *= 2
    return out + [n]


_sweep: dict = {}


def _measure_sweep(run_pool):
    """Best over rounds (noise only slows runs down): trivial-call rates at each N, and rates at
    both kernel durations on all N."""
    actors = _fleet()
    n = len(actors)
    sizes = sweep_sizes(n)
    rng = _rng(4)
    trivial = {k: [] for k in sizes}
    short, long_ = [], []
    short_jobs = max(4 * n, int(n / T.short_kernel_s * 0.05))  # 0.05 s of work at perfect scaling
    for _ in range(T.model_rounds):
        for k in sizes:
            jobs = fleet.jobs(T.trivial_calls, 0.0, seed=rng.randrange(2**31))
            trivial[k].append(_drive(run_pool, actors[:k], jobs)[0])
        short.append(_drive(run_pool, actors, fleet.jobs(short_jobs, T.short_kernel_s, seed=rng.randrange(2**31)))[0])
        long_.append(_drive(run_pool, actors, fleet.jobs(T.driver_jobs_per_actor * n, T.long_kernel_s,
                                                         seed=rng.randrange(2**31)))[0])
    return (n, sizes, [max(trivial[k]) for k in sizes], {T.short_kernel_s: max(short), T.long_kernel_s: max(long_)})


def _number(value, what: str) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise AssertionError(f"{what} returned {value!r}, not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise AssertionError(f"{what} returned {value!r}; expected a positive, finite number")
    return value


def _model(run_pool, predict_throughput, fit_overhead, t_kernel: float) -> None:
    # 1. The fit must recover seeded overheads from synthetic data: one small, one large, so
    #    that no typed-in number can match both.
    rng = _rng(5 if t_kernel == T.short_kernel_s else 6)
    ns = [1, 2, 4, 8, 16]
    for low, high in ((0.0001, 0.0005), (0.002, 0.01)):
        true_o = rng.uniform(low, high)
        synthetic = [(1 + rng.uniform(-T.fit_noise, T.fit_noise)) / true_o for _ in ns]
        got = _number(harness.call(fit_overhead, ns, synthetic, what="fit_overhead(n_actors, throughputs)",
                                   timeout_s=T.call_timeout_s), "fit_overhead")
        if abs(got / true_o - 1) > T.fit_tolerance:
            raise AssertionError(
                f"on synthetic trivial-call rates made with t_overhead = {true_o * 1e3:.3f} ms (seed {SEED}; "
                f"about {1 / true_o:,.0f} calls/s at every N), fit_overhead returned {got * 1e3:.3f} ms "
                f"(allowed ±{T.fit_tolerance:.0%}): fit the data it is given"
            )
    # 2. Fit to the grader's trivial-call sweep of the learner's driver; predict; compare.
    n, sizes, trivial, rates = harness.memo(_sweep, run_pool, lambda: _measure_sweep(run_pool))
    t_o = _number(harness.call(fit_overhead, sizes, trivial, what="fit_overhead(n_actors, throughputs)",
                               timeout_s=T.call_timeout_s), "fit_overhead")
    pred = _number(harness.call(predict_throughput, n, t_kernel, t_o, what="predict_throughput(...)",
                                timeout_s=T.call_timeout_s), "predict_throughput")
    measured = rates[t_kernel]
    ratio = measured / pred
    low, high = T.model_band
    if not low <= ratio <= high:
        why = (f"your driver reaches only {ratio:.2f}x of your own model: if the model is right, the driver "
               "is the bottleneck" if ratio < low else
               f"the driver does {ratio:.2f}x better than your model predicts: it is too pessimistic")
        raise AssertionError(
            f"{t_kernel * 1e3:g} ms kernels on {n} emulated GPUs: fitted on the grader's trivial-call sweep "
            f"(t_overhead = {t_o * 1e3:.3f} ms) your model predicts {pred:,.0f} calls/s, the grader measured "
            f"your run_pool at {measured:,.0f} calls/s (needs {low:g}–{high:g}x the prediction): {why}"
        )


@register(LAB, "model-short-kernel", 2)
def model_short_kernel(run_pool, predict_throughput, fit_overhead):
    """Model vs the grader's re-measurement at the short kernel (driver-bound regime)."""
    _model(run_pool, predict_throughput, fit_overhead, T.short_kernel_s)


@register(LAB, "model-long-kernel", 2)
def model_long_kernel(run_pool, predict_throughput, fit_overhead):
    """Model vs the grader's re-measurement at the long kernel (GPU-bound regime)."""
    _model(run_pool, predict_throughput, fit_overhead, T.long_kernel_s)


def calibrate() -> list[str]:
    """The references against themselves, and the reference model against the reference driver."""
    fleet.start()
    actors = fleet.emulated()
    jobs = fleet.jobs(T.driver_jobs_per_actor * len(actors), T.long_kernel_s)
    fn = lambda: len(jobs) / _timed(reference.run_pool, actors, jobs)[0]  # noqa: E731
    lines = [f"driver vs itself on {len(actors)} emulated GPUs: {_interleave(fn, fn, T.driver_rounds):.3f} "
             f"(top tier {T.driver_tiers[-1]})"]
    [w1, w2] = fleet.start_actors(reference.ImageWorker, 2, options=fleet.device_options(reserve=False))
    refs = [ray.put(kernels.make_batch(T.worker_batch_size, seed=s, device=False)) for s in range(T.worker_batches)]
    ratio = _interleave(lambda: 1 / _timed(reference.run_pool, [w1], refs)[0],
                        lambda: 1 / _timed(reference.run_pool, [w2], refs)[0], T.worker_rounds)
    fleet.release([w1, w2])
    lines.append(f"image actor vs itself: {ratio:.3f} (top tier {T.worker_tiers[-1]})")
    n, sizes, trivial, rates = _measure_sweep(reference.run_pool)
    t_o = reference.fit_overhead(sizes, trivial)
    lines.append(f"per-call overhead (trivial calls, fitted) {t_o * 1e3:.3f} ms; trivial rates "
                 + ", ".join(f"N={k}: {r:,.0f}/s" for k, r in zip(sizes, trivial)))
    for t_k, r in rates.items():
        pred = reference.predict_throughput(n, t_k, t_o)
        lines.append(f"{t_k * 1e3:g} ms on {n}: measured {r:,.0f}/s, model {pred:,.0f}/s, ratio {r / pred:.2f} "
                     f"(band {T.model_band}); knee at N ≈ {t_k / t_o:.1f}")
    return lines
