"""05_capstone: sizing a GPU batch-inference pipeline, and building it with Ray Data.

The lab's spec, read by the grader, the reference process and the learner's kernel alike
(:mod:`autograder.labs`).
"""

from autograder.labs import LabSpec

SPEC = LabSpec(
    lab="05_capstone",
    ray=True,  # the grader starts the lab's Ray; the kernel joins it
    reference_ray="own",  # the reference pipeline runs in a Ray of its own, out of the kernel's sight
    # what the checks call, and the helpers the lab's plan is built from: each gets a deadline of its
    # own, so a hang in any of them costs one deadline (the lesson's cells call ``plan`` only)
    learner_names=("plan", "build_pipeline", "per_gpu", "cpu_rate", "node_capacity", "scale"),
)
LAB = SPEC.lab
