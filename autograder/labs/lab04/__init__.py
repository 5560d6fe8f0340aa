"""04_data_affinity: placement of work relative to data on an emulated multi-node cluster.

The lab's spec, read by the grader, the reference process and the learner's kernel alike
(:mod:`autograder.labs`).
"""

LAB = "04_data_affinity"
RAY = True  # the grader starts the lab's Ray in its reference process; the kernel joins it
RAY_START = "emulated_cluster"  # the kit step that starts this lab's Ray in the reference process
LEARNER_NAMES = ("shard_nodes", "TaskJob", "PinnedJob", "ResidentWorker", "link_bytes_per_s")  # what the checks call
