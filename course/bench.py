"""Measurement discipline in one place: warm-up, repeats, median, spread, A/B interleaving.

Every number a lab reports comes through here, so every lab measures the same way:

* **warm-up** calls first (compilation, caches, lazy imports are not the steady state);
* **synchronise** before reading the clock (GPU work is asynchronous);
* **repeat** until the spread is small or a time budget is spent, and report the **median**
  (robust to the odd slow call) with its spread;
* **compare side by side**: A and B interleaved (A B A B ...) so that drift, turbo and noisy
  neighbours hit both equally; the ratio of medians is what a target is set on.
"""

from __future__ import annotations

import ctypes
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

from . import backend

# Captured at import: measurements keep working if a notebook later replaces time.perf_counter.
_perf_counter = time.perf_counter

# glibc adapts when it maps large arrays fresh from the OS (paying page faults) to what a
# process has freed before, so a NumPy kernel's speed depends on the process's history:
# measured on a 2-core machine, 16 batches of 64 images took 41 ms in one fresh process
# and 12 ms with these thresholds fixed (glibc's own tunables, ``man mallopt``).
MMAP_THRESHOLD = 64 * 2**20
TRIM_THRESHOLD = 128 * 2**20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)


@dataclass
class Measurement:
    """Repeated timings of one callable: seconds per call, and items per call."""

    samples: list[float]
    items: int = 1
    warmup: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        """Median seconds per call."""
        return statistics.median(self.samples)

    @property
    def spread(self) -> float:
        """Relative spread: interquartile range over the median (0 = perfectly steady)."""
        return relative_spread(self.samples)

    @property
    def rate(self) -> float:
        """Items per second at the median call time."""
        return self.items / self.median if self.median > 0 else float("inf")

    def __str__(self) -> str:
        return (
            f"{self.rate:,.1f} items/s (median {self.median * 1e3:.3f} ms/call, "
            f"spread {self.spread:.1%}, n={len(self.samples)})"
        )


def steady_allocator() -> bool:
    """Fix glibc's malloc thresholds in this process, so timings measure code, not the allocator.

    The same setting :data:`course.fleet.STEADY_ALLOCATOR` gives an actor through its
    environment, applied at run time. Returns whether it applied (False off glibc).
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                    and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    except (OSError, AttributeError):
        return False


def relative_spread(samples: list[float]) -> float:
    """Interquartile range divided by the median; 0 for fewer than two samples."""
    if len(samples) < 2:
        return 0.0
    q = statistics.quantiles(samples, n=4, method="inclusive")
    med = statistics.median(samples)
    return (q[2] - q[0]) / med if med > 0 else 0.0


def time_call(fn: Callable[[], object], *, sync: bool = True, clock=None) -> float:
    """Seconds for one call of ``fn``, synchronising the device before stopping the clock."""
    clock = clock or _perf_counter
    if sync:
        backend.sync()
    start = clock()
    fn()
    if sync:
        backend.sync()
    return clock() - start


def measure(
    fn: Callable[[], object],
    *,
    items: int = 1,
    warmup: int = 1,
    min_repeats: int = 5,
    max_repeats: int = 100,
    budget_s: float = 2.0,
    target_spread: float = 0.05,
    sync: bool = True,
) -> Measurement:
    """Time ``fn`` repeatedly: ``warmup`` discarded calls, then at least ``min_repeats``,
    stopping once the relative spread is at most ``target_spread`` or ``budget_s`` seconds
    of measuring have passed (never more than ``max_repeats``).

    ``items`` is how many items one call processes (images in a batch), for :attr:`rate`.
    """
    warm = [time_call(fn, sync=sync) for _ in range(warmup)]
    samples: list[float] = []
    started = _perf_counter()
    while len(samples) < max_repeats:
        samples.append(time_call(fn, sync=sync))
        if len(samples) >= min_repeats and (
            relative_spread(samples) <= target_spread or _perf_counter() - started >= budget_s
        ):
            break
    return Measurement(samples, items, warm)


@dataclass
class Comparison:
    """A vs B measured interleaved: per-round throughput ratios A/B and their median."""

    a: Measurement
    b: Measurement
    ratios: list[float]

    @property
    def ratio(self) -> float:
        """Median of the per-round ratios of A's rate to B's (above 1: A is faster)."""
        return statistics.median(self.ratios)

    @property
    def spread(self) -> float:
        """Relative spread of the per-round ratios."""
        return relative_spread(self.ratios)

    def __str__(self) -> str:
        return f"A/B = {self.ratio:.3f} (spread {self.spread:.1%}, {len(self.ratios)} rounds)"


def compare(
    a: Callable[[], object],
    b: Callable[[], object],
    *,
    items_a: int = 1,
    items_b: int | None = None,
    rounds: int = 7,
    calls_per_round: int = 1,
    warmup: int = 1,
    sync: bool = True,
) -> Comparison:
    """Measure A and B interleaved (A B A B ...) and return the ratio of their rates.

    Each round times ``calls_per_round`` calls of A, then of B; the round's ratio is A's
    rate over B's. The median over ``rounds`` cancels slow drift that would bias a
    measure-A-then-measure-B comparison.
    """
    items_b = items_a if items_b is None else items_b
    for _ in range(warmup):
        time_call(a, sync=sync)
        time_call(b, sync=sync)
    sa: list[float] = []
    sb: list[float] = []
    ratios: list[float] = []
    for r in range(rounds):
        # Alternate who goes first, so neither always runs on a warmer machine.
        order = [(0, a), (1, b)] if r % 2 == 0 else [(1, b), (0, a)]
        times = [0.0, 0.0]
        for slot, fn in order:
            times[slot] = sum(time_call(fn, sync=sync) for _ in range(calls_per_round)) / calls_per_round
        sa.append(times[0])
        sb.append(times[1])
        rate_a, rate_b = items_a / times[0], items_b / times[1]
        ratios.append(rate_a / rate_b)
    return Comparison(Measurement(sa, items_a), Measurement(sb, items_b), ratios)


def interleaved(fns: dict, *, rounds: int = 7, warmup: int = 1, sync: bool = True) -> dict:
    """Measure several callables in the same rounds; ``{key: Measurement}``.

    ``fns`` maps a key to ``(fn, items)``. Each round times every callable once, in an
    order that reverses from round to round, so drift and noisy neighbours hit all of them
    alike -- :func:`compare` for more than two.
    """
    keys = list(fns)
    for _ in range(warmup):
        for k in keys:
            time_call(fns[k][0], sync=sync)
    samples: dict = {k: [] for k in keys}
    for r in range(rounds):
        for k in keys if r % 2 == 0 else keys[::-1]:
            samples[k].append(time_call(fns[k][0], sync=sync))
    return {k: Measurement(samples[k], fns[k][1]) for k in keys}
