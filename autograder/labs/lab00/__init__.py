"""00_measure: measuring throughput correctly, and choosing a batch size.

The lab's spec, read by the grader, the reference process and the learner's kernel alike
(:mod:`autograder.labs`).
"""

from autograder.labs import LabSpec

SPEC = LabSpec(
    lab="00_measure",
    learner_names=("throughput", "best_batch_size", "submit_batch"),  # what the checks call
)
LAB = SPEC.lab
