"""00_measure: measuring throughput correctly, and choosing a batch size.

The lab's spec, read by the grader, the reference process and the learner's kernel alike
(:mod:`autograder.labs`).
"""

LAB = "00_measure"
LEARNER_NAMES = ("throughput", "best_batch_size", "submit_batch")  # what the checks call
