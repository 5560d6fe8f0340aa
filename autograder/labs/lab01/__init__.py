"""01_actor_scaling: Ray actors as GPU workers, and a driver that keeps them busy.

The lab's spec, read by the grader, the reference process and the learner's kernel alike
(:mod:`autograder.labs`).
"""

LAB = "01_actor_scaling"
RAY = True  # the grader starts the lab's Ray in its reference process; the kernel joins it
LEARNER_NAMES = ("ImageWorker", "run_pool", "predict_throughput", "fit_overhead")  # what the checks call
