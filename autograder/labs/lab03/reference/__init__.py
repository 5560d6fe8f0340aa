"""Reference answers for 03_quotas."""

from __future__ import annotations

from ray.util import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from course import k8s


def quota_resources(quotas):
    """The node's custom resources: one unit of ``tenant_<name>`` per GPU of quota."""
    return {f"tenant_{t}": q for t, q in quotas.items()}


def resource_options(tenant):
    """Each kernel of ``tenant`` also takes one unit of its tenant resource."""
    return {"resources": {f"tenant_{tenant}": 1}}


def tenant_groups(quotas):
    """One placement group per tenant reserving ``quota`` one-GPU bundles."""
    return {t: placement_group([{"GPU": 1}] * q, strategy="PACK", name=f"tenant-{t}")
            for t, q in quotas.items()}


def group_options(tenant, groups):
    """Each kernel of ``tenant`` runs in one of its group's bundles."""
    return {"scheduling_strategy": PlacementGroupSchedulingStrategy(groups[tenant])}


def lending_policy(quotas):
    """Kueue's cohort: each tenant keeps its quota as nominal quota and may borrow any unused GPU."""
    return {t: {"nominal": q, "borrowing_limit": None} for t, q in quotas.items()}


def gang_group(k):
    """A job of ``k`` GPUs: all ``k`` one-GPU bundles or none, all on one node."""
    return placement_group([{"GPU": 1}] * k, strategy="STRICT_PACK")


def gpu_quota_by_hand(namespace, gpus):
    """A ResourceQuota capping ``namespace``'s GPU requests at ``gpus``, written out field by field."""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu-quota", "namespace": namespace},
        "spec": {"hard": {"requests.nvidia.com/gpu": str(gpus)}},
    }


def tenant_manifests(quotas):
    """The same policy on Kubernetes: per tenant a namespace, quota (the hand-written one), limit
    range, queues and a RayCluster."""
    objs = [k8s.resource_flavor()]
    for t, q in quotas.items():
        ns = f"tenant-{t}"
        objs += [
            k8s.namespace(ns),
            gpu_quota_by_hand(ns, q),
            k8s.limit_range(ns, q),
            k8s.cluster_queue(ns, q, namespaces=[ns]),
            k8s.local_queue(ns, ns),
            k8s.ray_cluster("ray", ns, workers=q, gpus_per_worker=1, queue="gpu-queue"),
        ]
    return objs


def degraded() -> dict:
    """The reference policy made half as fast on purpose, for ``python -m autograder calibrate``:
    every kernel takes two units of its tenant's quota (custom resources), and each tenant's
    placement group holds half its quota. Under a saturating load either runs half the kernels
    at once; an overhead tier this policy passes cannot tell a quota from half a quota here.
    Its lending policy lends nothing (fixed quotas): it recovers none of their idle GPU-time."""

    def no_lending(quotas):
        return {t: {"nominal": q, "borrowing_limit": 0} for t, q in quotas.items()}

    def half_options(tenant):
        return {"resources": {f"tenant_{tenant}": 2}}

    def half_groups(quotas):
        return tenant_groups({t: max(1, q // 2) for t, q in quotas.items()})

    return {**globals(), "resource_options": half_options, "tenant_groups": half_groups,
            "lending_policy": no_lending}
