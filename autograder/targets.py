"""Every lab's targets, in one place.

Throughput targets are ratios to a reference measured side by side in the same run
(interleaved, median), never seconds; correctness, locality and completion targets are
fractions and counts. A tiered goal lists its tiers; each tier is one graded cell.
Time limits bound how long the grader lets learner code run (they are safety limits, not
targets).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# The longest the grader lets one call of learner code run. A safety limit, not a target;
# instructors (and the test suite) may lower it with AUTOGRADER_CALL_TIMEOUT_S.
def call_timeout_s() -> float:
    """The limit on one call of learner code, read when a grading run starts."""
    return float(os.environ.get("AUTOGRADER_CALL_TIMEOUT_S", "60"))


@dataclass(frozen=True)
class Lab00:
    """00_measure: measuring throughput correctly, and choosing a batch size."""

    rel_tolerance: float = 0.15           # learner's items/s within ±15 % of the known truth
    # seconds of work per call of a known-cost workload, drawn per run. Each call's round trip
    # (kernel -> grader -> kernel) adds to what the learner times but not to the grader's truth:
    # ~0.2-0.4 ms measured on 2 cores (-1 to -3 %), but a grading side by side (grade --workers 2,
    # one core per slot) once read past -15 % on 10-25 ms calls; 30-60 ms gives 3x that headroom.
    workload_seconds: tuple = (0.03, 0.06)
    outlier_every: int = 4                # noisy workload: every 4th call is slow ...
    outlier_factor: float = 8.0           # ... by this factor
    warmup_calls: tuple = (0.30, 0.15, 0.075)  # seconds taken by the first calls (compile, caches)
    # learner's batch size: rate ≥ these × the best of the grader's sweep (calibrate --runs 5:
    # the reference's choice 1.00x every run, the worst choice 0.28-0.31x)
    batch_tiers: tuple = (0.6, 0.8)
    batch_rounds: int = 9                 # interleaved rounds of that sweep (every candidate each round) ...
    batch_sweep_images: int = 2048        # ... each timing this many images (short samples were noisy)


LAB00 = Lab00()

TARGETS = {"00_measure": LAB00}


@dataclass(frozen=True)
class Lab01:
    """01_actor_scaling: GPU actors, a pipelined driver, and where throughput stops growing."""

    short_kernel_s: float = 0.002         # emulated kernel durations (sleeps standing in for kernels):
    long_kernel_s: float = 0.050          # the knee sits at a few actors for the short one, far out for the long
    # learner's actor: rate ≥ these × the reference actor's. calibrate --runs 5 (2 cores,
    # 2026-12-02): reference 0.97-1.03x, half-speed copy 0.60-0.64x (its per-call overhead is not halved)
    worker_tiers: tuple = (0.5, 0.7)
    worker_batches: int = 16              # batches per timed call of one real-kernel actor ...
    worker_batch_size: int = 64           # ... of this many images
    worker_rounds: int = 7                # interleaved rounds, learner vs reference actor
    # learner's driver: rate ≥ these × the reference driver's (calibrate --runs 5: reference
    # 1.00x every run, half-speed copy 0.51-0.52x)
    driver_tiers: tuple = (0.5, 0.8)
    driver_jobs_per_actor: int = 6        # jobs per timed driver call, per emulated GPU
    driver_rounds: int = 7                # interleaved rounds, learner vs reference driver
    min_busy_fraction: float = 0.5        # emulated GPUs busy on average ≥ this × N (a loop gets ~1/N)
    model_band: tuple = (0.8, 2.0)        # measured / predicted throughput must lie in this band
    model_rounds: int = 3                 # rounds of the grader's sweep (best per point)
    trivial_calls: int = 160              # calls per trivial-call measurement
    fit_tolerance: float = 0.25           # fit_overhead recovers a seeded overhead within ±25 % ...
    fit_noise: float = 0.05               # ... from synthetic trivial-call rates with ±5 % seeded noise
    start_timeout_s: float = 120.0        # actors to start


LAB01 = Lab01()

TARGETS["01_actor_scaling"] = LAB01


@dataclass(frozen=True)
class Lab02:
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


LAB02 = Lab02()

TARGETS["02_restart_recovery"] = LAB02


@dataclass(frozen=True)
class Lab03:
    """03_quotas: per-tenant GPU quotas on Ray (custom resources, placement groups) and Kubernetes."""

    pool: int = 16                         # logical GPUs shared by the tenants
    quotas: tuple = (("a", 8), ("b", 4), ("c", 4))  # each tenant's quota (sums to the pool)
    noisy: str = "a"                       # the tenant that floods
    flood_factor: int = 4                  # the noisy tenant keeps this many times its quota in flight
    burst_s: float = 0.6                   # each tenant floods alone this long (enforcement)
    phase_s: float = 1.2                   # one measuring phase (isolation, overhead)
    rounds: int = 3                        # interleaved rounds (A B, B A, A B): the median of 3 resists one stalled round
    isolation_min: float = 0.45            # quiet tenants keep ≥ this fraction of their solo throughput.
    # 2-core CPU machine, 2026-12-03: the reference policy 1.00 (idle, twice), 0.63-0.9 before, and
    # 0.50 once in a full CI run (the solution, graded with its sandboxed kernel's Ray beside it);
    # no quotas at all 0.30-0.40 (idle, twice). Contention on 2 cores moves the correct policy
    # towards the leaky one: a side-by-side ratio to the reference policy is the lasting fix.
    overhead_tiers: tuple = (0.5, 0.75)    # custom-resource quotas' throughput ≥ these × no quotas, same run
    # Set from `python -m autograder calibrate --runs 3` on a 2-core CPU machine: both policies run
    # on one warmed Ray, where the reference measured 1.00x every run (custom resources and groups);
    # a half-quota copy measured 0.50-0.52x (resources) and 0.50-0.59x (groups); --runs 5 on
    # 2026-12-02: reference 1.00x and half-quota 0.50x in every run, both policies. Top tier 0.75:
    # ≤ 0.85 × the lowest reference ratio, ≥ 1.2 × the highest degraded one.
    groups_overhead_tiers: tuple = (0.5, 0.75)
    pg_ready_timeout_s: float = 30.0       # a learner's placement groups must be ready by then
    drain_timeout_s: float = 60.0          # kernels still queued after a run must start by then (worker
                                           # start-up on a loaded 2-core machine left 12 pending after 20 s)


LAB03 = Lab03()
TARGETS["03_quotas"] = LAB03


@dataclass(frozen=True)
class Lab04:
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
    # raylets and a dozen actors share two cores). calibrate --runs 5 with 8 rounds: reference
    # 0.89-1.10x, half-speed copy 0.40-0.54x; the top tier sits 0.29 below the one and 0.06 above the other
    throughput_tiers: tuple = (0.4, 0.6)
    resident_calls: int = 5                # calls of a resident worker; it may copy its shard once
    resident_images: int = 256


LAB04 = Lab04()
TARGETS["04_data_affinity"] = LAB04


@dataclass(frozen=True)
class Lab05:
    """05_capstone: a sizing plan from measured numbers, and a Ray Data batch-inference pipeline."""

    plan_band: float = 0.10                # GPUs and CPU workers within ±10 % of the grader's model (or one node)
    plan_max_actors: int = 4               # actors per GPU a scenario allows
    plan_scenarios: int = 6                # scenarios: each limit once, two more drawn, in a drawn order
    correct_images: int = 64               # images of the correctness run (every one checked)
    correct_batch: int = 16
    pool_actors: int = 2                   # replicas asked for, in every run
    # images per timed run, learner vs reference: ~3.5 ms of CPU work each on this kit's 2-core
    # machine (JPEG made, decoded, the 224x224 network), so the work outweighs the ~1.6 s a run
    # spends starting its pool and Ray Data -- with fewer, a half-speed copy read ~0.9x
    throughput_images: int = 768
    startup_images: int = 32              # each round, each side: a run of this many, then the timed one
    throughput_batch: int = 32             # 32 images of 224x224x3: im2col of the first layer ~43 MB
    throughput_checked: int = 48           # images of each timed run whose logits the grader recomputes
    value_rtol: float = 1e-3               # logits vs the grader's NumPy computation (float32 sums
    value_atol: float = 1e-4               # in another order on a GPU)
    rounds: int = 5                        # interleaved rounds, median of per-round ratios
    # images/s ≥ these × the reference pipeline's, same run. Counting beyond start-up puts a
    # half-speed copy near 0.5x in theory; it also magnifies the reference's noise (~1.6x at 768
    # images), so the top tier sits between the two
    throughput_tiers: tuple = (0.4, 0.7)


LAB05 = Lab05()
TARGETS["05_capstone"] = LAB05
