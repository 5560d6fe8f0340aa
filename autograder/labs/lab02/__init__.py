"""02_restart_recovery: actor restarts, checkpoints and exactly-once effects under injected failures.

The lab's spec, read by the grader, the reference process and the learner's kernel alike
(:mod:`autograder.labs`).
"""

LAB = "02_restart_recovery"
RAY = True  # the grader starts the lab's Ray; the kernel joins it
REFERENCE_RAY = "own"  # sandboxed, the lab's Ray holds kit steps only (no check calls the reference)
LEARNER_NAMES = ("recovery_latency", "CheckpointedAccumulator", "PipelineWorker")  # what the checks call
