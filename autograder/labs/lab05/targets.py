"""The targets of 05_capstone, read by its checks (and by its kit steps).

Throughput targets are ratios to a reference measured side by side in the same run; the
rest are fractions, counts and safety limits (see :mod:`autograder.targets`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Targets:
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


TARGETS = Targets()
