"""Checks for 00_measure: the learner's throughput measurement and batch-size sweep.

All grader-side (see :mod:`autograder.checks`). The learner's ``throughput(fn, items)`` is
handed a *callback*: each call of ``fn`` is carried out in the grader's process, which times
the work itself. Four workloads: a plain one, one that only does its work at the learner's
``course.backend.sync()`` (an emulated asynchronous launch, as on a GPU), one that is slow for
its first calls (warm-up), and one with seeded slow outliers. The learner's sweep
``best_batch_size(run, candidates)`` gets a seeded cost model (a callback), then the real
image kernel on seeded batches built in the learner's own process (``course.kernels.BatchRun``:
a callback's round trip per call would make small batches look slow there); whatever the
learner measures, the grader then times every candidate itself, interleaved, and scores the
choice by its rate over the best rate of that sweep. The learner's
Ray task gets a seed and size drawn for this run and its values are checked against the
grader's own computation. Durations and seeds are drawn per run (``AUTOGRADER_SEED`` fixes
them), so a number typed into the notebook cannot match, and nothing handed to learner code
carries an answer.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from course import bench, kernels

from . import LAB
from .targets import TARGETS as T
from ...transport import Callback
from ...checks import register, tiers

if TYPE_CHECKING:
    from ...grader.session.session import Session

CANDIDATES = (8, 16, 32, 64, 128, 256)  # batch sizes offered on the cost model
# ... and on the real kernel: 4x apart, from one image per call (all per-call overhead) up.
# On a 2-core CPU the kernel's rate is nearly flat from 8 to 256 images (the worst of those
# measured 0.61x the best, `python -m autograder calibrate`), too flat to tell a good choice
# from a bad one; from 1 to 256 it spans 4-5x on that CPU (18k to 85k images/s), and more on a GPU.
KERNEL_CANDIDATES = (1, 4, 16, 64, 256)


# The most of a call's gap counted, as a fraction of its work: a round trip took up to a third.
# Learner code can widen the gap at will (pause between calls); capped, that lowers the truth by
# at most a third, so a number typed in without measuring still misses it (the work per call is
# drawn per run, 30-60 ms).
GAP_CAP = 0.5


class Workload:
    """Work of known cost, done in the grader's process: each call "processes" items by sleeping.

    It logs, with the grader's clock, how long every call's work took, so the true
    steady-state rate is measured, not assumed -- and how long after each call returned the
    next one arrived: the round trip through the kernel that this stand-in adds (a real
    ``fn`` has none), which the learner's clock counts. On a loaded one-core grading slot that
    round trip once took a third of a 30-60 ms call; a call's cost as the learner sees it is
    its work plus that gap, counted up to half the work (:data:`GAP_CAP`).
    """

    def __init__(self, items: int, seconds: float, *, warmup=(), outliers=0, outlier_factor=1.0, seed=0):
        self.items, self.seconds = items, seconds
        self.warmup, self.outliers, self.outlier_factor = list(warmup), outliers, outlier_factor
        # Outliers fall on every `outliers`-th call from a seeded phase: any run of that many
        # consecutive calls holds exactly one, wherever a learner starts timing.
        self._phase = random.Random(seed).randrange(outliers) if outliers else 0
        self.calls = 0
        self.log: list[tuple[str, float]] = []  # (kind, seconds of work) per call
        self.gaps: list[float] = []  # seconds from each call's return to the next call's start
        self._returned: float | None = None

    def __call__(self):
        n, self.calls = self.calls, self.calls + 1
        if n < len(self.warmup):
            kind, seconds = "warmup", self.warmup[n]
        elif self.outliers and n % self.outliers == self._phase:
            kind, seconds = "outlier", self.seconds * self.outlier_factor
        else:
            kind, seconds = "steady", self.seconds
        start = time.perf_counter()
        if self._returned is not None:
            self.gaps.append(start - self._returned)
        time.sleep(seconds)
        self._returned = time.perf_counter()
        self.log.append((kind, self._returned - start))

    def true_rate(self) -> float | None:
        """Items per second in the steady state, from the grader's own timings (None if never
        run): each steady call's work plus the gap before the call after it (the round trip,
        capped), the median of those."""
        steady = [s + min(self.gaps[i] if i < len(self.gaps) else 0.0, GAP_CAP * s)
                  for i, (kind, s) in enumerate(self.log) if kind == "steady"]
        return self.items / statistics.median(steady) if steady else None


def _workload(session: Session, salt: int, **kw) -> Workload:
    rng = session.rng(salt)
    return Workload(rng.randint(4, 64), rng.uniform(*T.workload_seconds), seed=rng.randrange(2**31), **kw)


def _verify(session: Session, workload: Workload, label: str, hint: str, *, deferred=False) -> None:
    got = session.learner.call("throughput", Callback(workload, deferred=deferred), workload.items,
                               what="throughput(fn, items)", returns="number")
    truth = workload.true_rate()
    if truth is None:
        raise AssertionError(f"{label}: throughput returned {got:,.1f} without running the workload "
                             "through its steady state; nothing was measured")
    error = got / truth - 1 if math.isfinite(got) else math.inf
    if not abs(error) <= T.rel_tolerance:
        raise AssertionError(
            f"{label}: you measured {got:,.1f} items/s, the grader timed {truth:,.1f} items/s "
            f"({error:+.0%}, allowed ±{T.rel_tolerance:.0%}). {hint}"
        )


@register(LAB, "throughput-known-cost", timed=True)
def throughput_known_cost(session):
    """A plain workload: the measurement must match the grader's own timing."""
    _verify(session, _workload(session, 1), "plain workload", "Time repeated calls and divide items by seconds.")


@register(LAB, "throughput-sync", timed=True)
def throughput_sync(session):
    """Work that only finishes on ``backend.sync()``, as GPU kernels do."""
    _verify(session, _workload(session, 2), "asynchronous workload",
            "If yours is far too high, the clock stopped before the work finished: "
            "call course.backend.sync() before reading it.", deferred=True)


@register(LAB, "throughput-warmup", timed=True)
def throughput_warmup(session):
    """The first calls are slow (compilation, caches); the steady state is what counts."""
    _verify(session, _workload(session, 3, warmup=T.warmup_calls), "workload with a slow start",
            "Discard warm-up calls before timing.")


@register(LAB, "throughput-outliers", timed=True)
def throughput_outliers(session):
    """Seeded slow outliers: the median resists them, the mean does not."""
    _verify(session, _workload(session, 4, outliers=T.outlier_every, outlier_factor=T.outlier_factor),
            "workload with slow outliers", "Report the median of several repeats, not the mean.")


class BatchModel:
    """A batch cost model with a known best batch size (a sleep standing in for a kernel).

    A call costs a fixed overhead plus a per-image cost, and the per-image cost quadruples
    past a seeded capacity (think: the batch no longer fits in cache or memory), so the
    best batch size is exactly that capacity.
    """

    def __init__(self, session: Session, salt: int, avoid: int | None = None):
        rng = session.rng(salt)
        self.best = rng.choice([n for n in CANDIDATES[1:5] if n != avoid])
        self.overhead = rng.uniform(0.001, 0.002)
        self.per_item = self.overhead / self.best

    def seconds(self, n: int) -> float:
        extra = max(0, n - self.best)
        return self.overhead + min(n, self.best) * self.per_item + extra * 4 * self.per_item

    def __call__(self, n):
        if n not in CANDIDATES:
            raise ValueError(f"run(n) takes one of the candidates {list(CANDIDATES)}; got {n!r}")
        time.sleep(self.seconds(n))


def _choice(session: Session, run, candidates=CANDIDATES) -> int:
    """The learner's ``best_batch_size`` on ``run`` (a callback or an argument spec), which must
    return one of the candidates."""
    got = session.learner.call("best_batch_size", Callback(run, name="run") if callable(run) else run,
                               list(candidates), what="best_batch_size(run, candidates)", returns="integer")
    if got not in candidates:
        raise AssertionError(f"best_batch_size returned {got!r}, not one of {list(candidates)}")
    return got


@register(LAB, "batch-model", timed=True)
def batch_model(session):
    """On two seeded cost models with different best sizes, the sweep must find both.

    Two models, so that no fixed answer can be right by luck.
    """
    first = BatchModel(session, 5)
    second = BatchModel(session, 8, avoid=first.best)
    for model in (first, second):
        got = _choice(session, model)
        if got != model.best:
            rate = lambda n: n / model.seconds(n)  # noqa: E731
            raise AssertionError(
                f"best_batch_size returned {got}; on this cost model the best of {list(CANDIDATES)} is "
                f"{model.best} ({rate(model.best):,.0f} items/s vs {rate(got):,.0f} for yours)")


@dataclass
class Sweep:
    """The learner's choice on the real kernel, and the grader's own sweep of every candidate."""

    choice: int
    rates: dict  # batch size -> images/s, measured by the grader

    @property
    def best(self) -> int:
        return max(self.rates, key=self.rates.get)

    @property
    def ratio(self) -> float:
        """The choice's rate over the best rate of the grader's sweep (1.0: the best)."""
        return self.rates[self.choice] / self.rates[self.best]


def measure_sweep(session: Session) -> Sweep:
    """The learner's choice, then every candidate timed by the grader in the same rounds."""
    repeat_for = session.answers()["repeat_for"]  # the reference's timing loop (InstructorOnly in a bundle)
    # the learner times the kernel in its own process (a callback's round trip to the grader
    # would make small batches look slow there: a 256 chosen against the sweep's 16 at 0.76x);
    # whatever it measures, the grade is the grader's own sweep at its choice
    seed = session.rng(9).randrange(10_000)  # drawn, not the session's seed (that decides other checks)
    choice = _choice(session, {"batch_run": seed, "sizes": list(KERNEL_CANDIDATES)}, KERNEL_CANDIDATES)
    run = kernels.BatchRun(seed, KERNEL_CANDIDATES)
    sweep = bench.interleaved({n: repeat_for(run, n, T.batch_sweep_images) for n in KERNEL_CANDIDATES},
                              rounds=T.batch_rounds)
    return Sweep(choice, {n: m.rate for n, m in sweep.items()})


tiers(LAB, ("batch-real-tier1", "batch-real-tier2"), T.batch_tiers, measure_sweep,
      lambda s, need: (f"batch size {s.choice} runs the image kernel at {s.ratio:.2f}x the rate of the "
                       f"best in the grader's sweep ({s.best}: {s.rates[s.best]:,.0f} images/s, every "
                       f"candidate measured interleaved); this tier needs {need:.2f}x"))


@register(LAB, "ray-task")
def ray_task(session):
    """The learner's Ray task returns the right result for inputs the grader chooses."""
    seed, n = session.rng(6).randrange(10_000), session.rng(7).randint(16, 96)
    got = session.learner.call("submit_batch", seed, n, what="submit_batch(seed, n)", returns="array",
                               prepare="ray", then="ray_get")
    values = np.asarray(got["data"], dtype=np.float64)
    if got["shape"] != [n] or not kernels.matches(values, kernels.reference_checksum(n, seed)):
        raise AssertionError(
            f"submit_batch({seed}, {n}) gave a result whose checksum is not the reference's "
            f"(expected {n} values from kernels.process(kernels.make_batch({n}, seed={seed})))")


def calibrate(session: Session) -> list[str]:
    """The reference's error on a known-cost workload (the batch tiers are in calibrate's table)."""
    workload = _workload(session, 1)
    error = session.answers()["throughput"](workload, workload.items) / workload.true_rate() - 1
    return [f"reference throughput on a known-cost workload: {error:+.1%} (allowed ±{T.rel_tolerance:.0%})"]
