"""03_quotas: per-tenant GPU quotas on Ray, and the same policy as Kubernetes manifests.

The lab's spec, read by the grader, the reference process and the learner's kernel alike
(:mod:`autograder.labs`).
"""

LAB = "03_quotas"
# the grader's own resource: the pool's size, whatever else the Ray has
LEARNER_NAMES = ("quota_resources", "resource_options", "tenant_groups", "group_options", "gpu_quota_by_hand",
                 "tenant_manifests")
