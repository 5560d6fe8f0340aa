"""01_actor_scaling: Ray actors as GPU workers, and a driver that keeps them busy.

The lab's spec, read by the grader, the reference process and the learner's kernel alike
(:mod:`autograder.labs`).
"""

LAB = "01_actor_scaling"
RAY = True  # the grader starts the lab's Ray; the kernel joins it
REFERENCE_RAY = "own"  # the reference runs in a Ray of its own, out of the kernel's sight
LEARNER_NAMES = ("ImageWorker", "run_pool", "predict_throughput", "fit_overhead")  # what the checks call
