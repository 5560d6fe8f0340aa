"""03_quotas: per-tenant GPU quotas on Ray, and the same policy as Kubernetes manifests.

The lab's spec, read by the grader, the reference process and the learner's kernel alike
(:mod:`autograder.labs`).
"""

from autograder.labs import LabSpec

SPEC = LabSpec(
    lab="03_quotas",
    learner_names=("quota_resources", "resource_options", "tenant_groups", "group_options", "gpu_quota_by_hand",
                   "tenant_manifests"),  # what the checks call
)
LAB = SPEC.lab
