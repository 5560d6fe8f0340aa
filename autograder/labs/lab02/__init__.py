"""02_restart_recovery: actor restarts, checkpoints and exactly-once effects under injected failures.

The lab's spec, read by the grader, the reference process and the learner's kernel alike
(:mod:`autograder.labs`).
"""

from autograder.labs import LabSpec

SPEC = LabSpec(
    lab="02_restart_recovery",
    ray=True,  # the grader starts the lab's Ray; the kernel joins it
    reference_ray="own",  # sandboxed, the lab's Ray holds kit steps only (no check calls the reference)
    learner_names=("recovery_latency", "CheckpointedAccumulator", "PipelineWorker"),  # what the checks call
)
LAB = SPEC.lab
