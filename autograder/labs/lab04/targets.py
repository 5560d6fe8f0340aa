"""The targets of 04_data_affinity, read by its checks (and by its kit steps).

Throughput targets are ratios to a reference measured side by side in the same run; the
rest are fractions, counts and safety limits (see :mod:`autograder.targets`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Targets:
    """04_data_affinity: placement of work relative to data on an emulated multi-node cluster."""

    shards: int = 8                        # shards in the grader's own (seeded, uneven) placement
    # interleaved rounds (A B, B A, ...), learner's job vs the reference's. Single rounds on four
    # raylets and 2 cores span 0.3x-2.4x for identical jobs; with 4 rounds a half-speed copy
    # read 0.72x in 1 of 5 runs (above the top tier), with 8 its median stayed 0.40-0.54x
    # (calibrate --runs 5, 2 cores, 2026-12-02)
    rounds: int = 8
    locality_tiers: tuple = (0.8, 0.95)    # bytes processed where they were / all bytes
    bytes_vs_naive: float = 0.25           # cross-node bytes ≤ this × the naive placement's, same run
    # images/s ≥ these × the reference locality-aware job's, median of per-round ratios (four
    # raylets and a dozen actors share two cores). Sandboxed calibrate, 2 cores, 2026-12-07, once
    # both sides ran under the same conditions (docs/measurement.md#same-conditions), 5 runs:
    # reference 0.93-1.13x, half-speed copy 0.44-0.55x. The top tier sits 0.23 below the one and
    # 0.15 above the other (at 0.6 it had been tuned while the learner's side was undercounted:
    # the half-speed copy then reached 0.55, 0.05 under it)
    throughput_tiers: tuple = (0.4, 0.7)
    resident_calls: int = 5                # calls of a resident worker; it may copy its shard once
    resident_images: int = 256


TARGETS = Targets()
