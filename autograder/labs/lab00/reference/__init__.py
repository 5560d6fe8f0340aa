"""Reference answers for 00_measure."""

from __future__ import annotations

import statistics
import time

from course import backend


def throughput(fn, items, *, warmup=2, repeats=7):
    """Items per second of ``fn()``: ``warmup`` untimed calls, then ``repeats`` calls each
    between ``backend.sync()`` calls (the clock stops when the work has, on a GPU too), and
    ``items`` over the median time (robust to outliers, unlike the mean)."""
    for _ in range(warmup):
        fn()
    backend.sync()
    times = []
    for _ in range(repeats):
        backend.sync()
        start = time.perf_counter()
        fn()
        backend.sync()
        times.append(time.perf_counter() - start)
    return items / statistics.median(times)


def repeat_for(run, n: int, images: int):
    """(callable, items): ``run(n)`` repeated until about ``images`` images are processed.

    Timing equal work per sample keeps tiny batches from drowning in timer and call noise. The
    grader's own sweep (``autograder/labs/lab00/checks.py``) times every candidate with it, and so
    does the degraded copy.
    """
    reps = max(1, images // n)

    def many():
        for _ in range(reps):
            run(n)

    return many, n * reps


def best_batch_size(run, candidates, images=512):
    """The candidate batch size with the highest measured items per second of ``run(n)``, each
    timed over about ``images`` images (``images // n`` calls of ``run(n)``), so that tiny batches
    are not drowned in timer and call noise."""
    rates = {}
    for n in candidates:
        reps = max(1, images // n)

        def many(n=n, reps=reps):
            for _ in range(reps):
                run(n)

        rates[n] = throughput(many, n * reps)
    return max(rates, key=rates.get)


def degraded() -> dict:
    """The reference made worse on purpose, for ``python -m autograder calibrate``: the same
    sweep, choosing the batch size with the *lowest* measured rate. A batch tier this copy
    passes cannot tell a good choice from the worst one on this machine."""

    def worst_batch_size(run, candidates, images=512):
        rates = {n: throughput(*repeat_for(run, n, images)) for n in candidates}
        return min(rates, key=rates.get)

    return {**globals(), "best_batch_size": worst_batch_size}
