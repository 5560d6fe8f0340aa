"""Reference answers for 00_measure."""

from __future__ import annotations

from course import bench

SWEEP_IMAGES = 512  # every batch size is timed over the same number of images


def throughput(fn, items: int) -> float:
    """Items per second of ``fn()``: warm-up, synchronised repeats, median."""
    return bench.measure(fn, items=items, warmup=2, min_repeats=5, budget_s=1.0).rate


def repeat_for(run, n: int, images: int = SWEEP_IMAGES):
    """(callable, items): ``run(n)`` repeated until about ``images`` images are processed.

    Timing equal work per sample keeps tiny batches from drowning in timer and call noise.
    """
    reps = max(1, images // n)

    def many():
        for _ in range(reps):
            run(n)

    return many, n * reps


def best_batch_size(run, candidates) -> int:
    """The candidate batch size with the highest measured items per second of ``run(n)``."""
    rates = {n: throughput(*repeat_for(run, n)) for n in candidates}
    return max(rates, key=rates.get)


def degraded() -> dict:
    """The reference made worse on purpose, for ``python -m autograder calibrate``: the same
    sweep, choosing the batch size with the *lowest* measured rate. A batch tier this copy
    passes cannot tell a good choice from the worst one on this machine."""

    def worst_batch_size(run, candidates) -> int:
        rates = {n: throughput(*repeat_for(run, n)) for n in candidates}
        return min(rates, key=rates.get)

    return {**globals(), "best_batch_size": worst_batch_size}
