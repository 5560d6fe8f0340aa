"""The targets of 02_restart_recovery, read by its checks (and by its kit steps).

Throughput targets are ratios to a reference measured side by side in the same run; the
rest are fractions, counts and safety limits (see :mod:`autograder.targets`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Targets:
    """02_restart_recovery: recovery latency, checkpointed state, exactly-once under chaos."""

    latency_clock_tol_s: float = 0.005    # clock and call-return slack around the grader's bounds
    latency_slack_s: float = 0.3          # learner may report at most this much above the truth ...
    latency_slack_frac: float = 0.5       # ... or this fraction of it, whichever is larger
    ckpt_items: int = 300                 # items fed to the checkpointed actor
    ckpt_every: tuple = (15, 40)          # seeded checkpoint interval K, items
    ckpt_kills: int = 3                   # SIGKILLs at seeded item numbers (never a multiple of K)
    chaos_items: int = 1000               # work items in the chaos run
    chaos_kill_every: tuple = (120, 200)  # a worker kill every this many items (seeded)
    chaos_timeout_s: float = 70.0         # the whole chaos run
    restart_timeout_s: float = 30.0       # a killed actor must answer again within this


TARGETS = Targets()
