"""Lab 03's checks, called directly: the reference passes, each mistake fails its own check.

The manifest checks and the option checks need no Ray. The measured Ray checks are exercised
through real nbgrader in tests/test_grading_lab03.py (the solution, and a quota that leaks).
"""

from __future__ import annotations

import copy

import pytest

from autograder.checks import lab03
from autograder.reference import lab03 as ref
from course import k8s, tenancy

MANIFEST_CHECKS = [lab03.manifests_valid, lab03.manifests_quotas, lab03.manifests_gpu_limits, lab03.manifests_fit]


def test_alt_quotas_split_the_pool_differently():
    alt = lab03._alt_quotas()
    assert set(alt) == set(lab03.QUOTAS) and sum(alt.values()) == lab03.T.pool
    assert alt != lab03.QUOTAS and min(alt.values()) >= 1


def test_points():
    from autograder.checks import for_lab

    checks = for_lab(lab03.LAB)
    measured = {n for n in checks if n.startswith(("resources-", "groups-"))}
    assert sum(c.points for c in checks.values()) >= 15
    assert sum(checks[n].points for n in measured) >= 8


@pytest.mark.parametrize("check", MANIFEST_CHECKS)
def test_reference_manifests_pass(check):
    check(ref.tenant_manifests)


def _edit(fn):
    """A tenant_manifests that post-processes the reference's output with ``fn(objs, quotas)``."""
    def tenant_manifests(quotas):
        objs = copy.deepcopy(ref.tenant_manifests(quotas))
        fn(objs, quotas)
        return objs
    return tenant_manifests


def _fractional(objs, quotas):
    for rc in k8s.by_kind(objs, "RayCluster"):
        rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"][k8s.GPU] = "0.5"


def _hard_coded(quotas):
    return ref.tenant_manifests({"a": 8, "b": 4, "c": 4})


def _too_big(objs, quotas):
    rc = next(o for o in k8s.by_kind(objs, "RayCluster") if o["metadata"]["namespace"] == "tenant-c")
    rc["spec"]["workerGroupSpecs"][0]["maxReplicas"] = quotas["c"] + 1
    rc["spec"]["workerGroupSpecs"][0]["replicas"] = quotas["c"] + 1


def _no_label(objs, quotas):
    for rc in k8s.by_kind(objs, "RayCluster"):
        rc["metadata"].pop("labels")


def _no_limitrange(objs, quotas):
    objs[:] = [o for o in objs if o["kind"] != "LimitRange"]


def _typo(objs, quotas):
    objs[1]["metadatta"] = objs[1].pop("metadata")


@pytest.mark.parametrize("fn,check,message", [
    (_edit(_fractional), lab03.manifests_valid, r"whole number, got '0\.5'"),
    (_edit(_typo), lab03.manifests_valid, r"missing required field 'metadata'|metadatta"),
    (_hard_coded, lab03.manifests_quotas, r"namespace tenant-\w has requests\.nvidia\.com/gpu \d+ .* expected \d+"),
    (_edit(_too_big), lab03.manifests_fit, r"RayCluster tenant-c/ray can hold \d+ GPUs at maxReplicas; the quota"),
    (_edit(_no_label), lab03.manifests_fit, r"kueue\.x-k8s\.io/queue-name=None, not a LocalQueue"),
    (_edit(_no_limitrange), lab03.manifests_gpu_limits, r"namespace tenant-a has no LimitRange"),
    (_edit(_fractional), lab03.manifests_gpu_limits, r"whole number ≥ 1 in limits"),
    (lambda quotas: [], lab03.manifests_valid, r"non-empty list"),
])
def test_bad_manifests_fail_the_right_check(fn, check, message):
    with pytest.raises(AssertionError, match=message):
        check(fn)


def test_manifests_not_implemented():
    def blank(quotas):
        raise NotImplementedError
    for check in MANIFEST_CHECKS:
        with pytest.raises(AssertionError, match="not implemented yet"):
            check(blank)


def test_harness_peak_and_options():
    assert tenancy._peak([(0, 1), (1, 2), (0.5, 1.5)]) == 2  # an end at t comes before a start at t
    assert tenancy.check_options(None, "a") == {}
    with pytest.raises(ValueError, match="may only set resources, scheduling_strategy; got num_gpus"):
        tenancy.check_options({"num_gpus": 0}, "a")
    with pytest.raises(ValueError, match="CPU/GPU are set by the harness"):
        tenancy.check_options({"resources": {"GPU": 1}}, "a")


def test_bad_options_fail_before_anything_runs():
    with pytest.raises(AssertionError, match="may only set resources"):
        lab03.measure_resources(ref.quota_resources, lambda t: {"num_gpus": 0.01})
    with pytest.raises(AssertionError, match="not implemented yet"):
        lab03.resources_enforced(ref.quota_resources, lambda t: (_ for _ in ()).throw(NotImplementedError()))
