"""03_quotas: per-tenant GPU quotas on Ray, and the same policy as Kubernetes manifests.

The lab's spec, read by the grader, the reference process and the learner's kernel alike
(:mod:`autograder.labs`).
"""

from autograder.labs import LabSpec

SPEC = LabSpec(
    lab="03_quotas",
    learner_names=("quota_resources", "resource_options", "tenant_groups", "group_options", "lending_policy", "gang_group",
                   "gpu_quota_by_hand", "tenant_manifests"),  # what the checks call
    # One core a slot starves the isolation check (tenant b's throughput while a floods, over its
    # own solo throughput, against the reference policy's; not a tier, so calibrate does not see
    # it): grade --workers 2 on 2 cores, 2026-12-07, cost one of two solutions resources-isolation
    # (0.69x solo where the reference policy kept 1.00x), 15/17; one at a time, 5 of 5 full marks.
    min_slot_cores=2,
)
LAB = SPEC.lab
