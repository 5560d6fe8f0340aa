"""02_restart_recovery: actor restarts, checkpoints and exactly-once effects under injected failures.

The lab's spec, read by the grader, the reference process and the learner's kernel alike
(:mod:`autograder.labs`).
"""

LAB = "02_restart_recovery"
RAY = True  # the grader starts the lab's Ray in its reference process; the kernel joins it
LEARNER_NAMES = ("recovery_latency", "CheckpointedAccumulator", "PipelineWorker")  # what the checks call
