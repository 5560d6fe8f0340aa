"""04_data_affinity: placement of work relative to data on an emulated multi-node cluster.

The lab's spec, read by the grader, the reference process and the learner's kernel alike
(:mod:`autograder.labs`).
"""

from autograder.labs import LabSpec

SPEC = LabSpec(
    lab="04_data_affinity",
    ray=True,  # the grader starts the lab's Ray; the kernel joins it
    ray_start="emulated_cluster",  # the kit step that starts this lab's Ray (and the reference's own)
    reference_ray="own",  # the reference's jobs run on an emulated cluster of their own, out of the kernel's sight
    # At idle CPU priority, not frozen, while the reference is timed: a frozen emulated cluster ran slower
    # after every thaw (the reference's own copy as the learner, sandboxed, 2 cores: 0.41x the reference
    # frozen, 0.90x not, 0.85x at idle priority; docs/security/sandbox.md#freeze)
    pause_learner="idle",
    learner_names=("shard_nodes", "TaskJob", "PinnedJob", "ResidentWorker", "link_bytes_per_s"),  # what the checks call
)
LAB = SPEC.lab
