"""Lab 03's grader-side checks, run in-process on learner functions given by name: the reference
passes, each mistake fails its own check.

The manifest checks and the option checks need no Ray. One policy that leaks is measured here
by the grader's own harness (a Ray started by this process, as the reference process starts
it while grading); the solution's full marks through real nbgrader are tests/test_labs.py's,
and a kernel that replaces every lab03 function is in tests/attacks_lab03.py.
"""

from __future__ import annotations

import copy
import re

import pytest

from autograder.labs.lab03 import checks as lab03
from autograder.labs.lab03 import reference as ref
from autograder.grader.session.session import Session
from autograder.transport import Learner
from course import k8s, tenancy
from notebooks import only_extended

MANIFEST_CHECKS = ["manifests-valid", "manifests-quotas", "manifests-gpu-limits", "manifests-fit"]


def session(**learner) -> Session:
    return Session(lab03.LAB, seed=4242, learner=Learner(namespace=learner))


def verdict(name: str, **learner):
    return session(**learner).run(name)


def test_alt_quotas_split_the_pool_differently():
    alt = lab03._alt_quotas(session())
    assert set(alt) == set(lab03.QUOTAS) and sum(alt.values()) == lab03.T.pool
    assert alt != lab03.QUOTAS and min(alt.values()) >= 1


def test_points():
    from autograder.grader.session.catalog import for_lab

    checks = for_lab(lab03.LAB)
    measured = {n for n in checks if n.startswith(("resources-", "groups-"))}
    assert sum(c.points for c in checks.values()) >= 15
    assert sum(checks[n].points for n in measured) >= 8


@pytest.mark.parametrize("check", MANIFEST_CHECKS)
def test_reference_manifests_pass(check):
    r = verdict(check, tenant_manifests=ref.tenant_manifests)
    assert r.passed, r.message


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


def _scoped(objs, quotas):  # valid on a cluster, but counts only pods with a deadline: caps no RayCluster
    for q in k8s.by_kind(objs, "ResourceQuota"):
        q["spec"]["scopes"] = ["Terminating"]


@pytest.mark.parametrize("fn,check,message", [
    (_edit(_fractional), "manifests-valid", r"whole number, got '0\.5'"),
    (_edit(_typo), "manifests-valid", r"missing required field 'metadata'|metadatta"),
    (_hard_coded, "manifests-quotas", r"namespace tenant-\w has requests\.nvidia\.com/gpu \d+ .* expected \d+"),
    (_edit(_scoped), "manifests-quotas", r"namespace tenant-a has requests\.nvidia\.com/gpu None"),
    (_edit(_too_big), "manifests-fit", r"RayCluster tenant-c/ray can hold \d+ GPUs at maxReplicas; the quota"),
    (_edit(_no_label), "manifests-fit", r"kueue\.x-k8s\.io/queue-name=None, not a LocalQueue"),
    (_edit(_no_limitrange), "manifests-gpu-limits", r"namespace tenant-a has no LimitRange"),
    (_edit(_fractional), "manifests-gpu-limits", r"whole number ≥ 1 in limits"),
    (lambda quotas: [], "manifests-valid", r"non-empty list"),
    (lambda quotas: [object()], "manifests-valid", r"returned .*object.*expected plain data"),
])
def test_bad_manifests_fail_the_right_check(fn, check, message):
    r = verdict(check, tenant_manifests=fn)
    assert not r.passed and re.search(message, r.message), r.message


def test_manifests_not_implemented():
    def blank(quotas):
        raise NotImplementedError
    for check in MANIFEST_CHECKS:
        assert "not implemented yet" in verdict(check, tenant_manifests=blank).message


def test_hand_cases_are_seeded_dns_labels_with_different_counts():
    cases = lab03._hand_cases(session())
    assert cases == lab03._hand_cases(session())  # same seed, same cases
    assert len({ns for ns, _ in cases}) == len({g for _, g in cases}) == 2
    for ns, gpus in cases:
        assert re.fullmatch(r"team-[a-z0-9]{5}", ns) and 1 <= gpus <= lab03.T.pool


def test_reference_quota_by_hand_passes():
    r = verdict("manifest-by-hand", gpu_quota_by_hand=ref.gpu_quota_by_hand)
    assert r.passed, r.message


def _hand(fn):
    """A gpu_quota_by_hand that post-processes the reference's quota with ``fn(obj)``."""
    def gpu_quota_by_hand(namespace, gpus):
        obj = ref.gpu_quota_by_hand(namespace, gpus)
        fn(obj)
        return obj
    return gpu_quota_by_hand


def _rename_gpu_key(key):
    def fn(obj):
        obj["spec"]["hard"][key] = obj["spec"]["hard"].pop(lab03.GPU_QUOTA_KEY)
    return fn


REQUESTS_ONLY = r'kubernetes\.io "Resource Quotas": for extended resources "only quota items with prefix requests\. are allowed"'


@pytest.mark.parametrize("fn,message", [
    (_hand(lambda o: o.update(apiVersion="apps/v1")), r"apiVersion is 'apps/v1'; expected 'v1'$"),
    (_hand(lambda o: o.update(kind="Quota")), r"kind is 'Quota'; expected 'ResourceQuota'$"),
    (_hand(lambda o: o["metadata"].update(namespace="tenant-b")),
     r"metadata\.namespace is 'tenant-b'; expected 'team-[a-z0-9]{5}', the namespace asked for$"),
    (_hand(lambda o: o["metadata"].pop("namespace")),
     r"rejects it: ResourceQuota/gpu-quota: metadata: missing required field 'namespace'$"),
    (_hand(lambda o: o["metadata"].pop("name")), r"rejects it: ResourceQuota/<no name>: metadata: missing required field 'name'$"),
    (lambda namespace, gpus: ref.gpu_quota_by_hand(namespace, gpus + 1),
     r"spec\.hard\['requests\.nvidia\.com/gpu'\] is '(\d+)'; expected (\d+), the GPUs asked for$"),
    (_hand(_rename_gpu_key("limits.nvidia.com/gpu")),
     r"spec\.hard has 'limits\.nvidia\.com/gpu'; expected 'requests\.nvidia\.com/gpu' \(" + REQUESTS_ONLY + r"\)$"),
    (_hand(_rename_gpu_key("nvidia.com/gpu")),
     r"spec\.hard has 'nvidia\.com/gpu'; expected 'requests\.nvidia\.com/gpu' \(" + REQUESTS_ONLY + r"\)$"),
    (_hand(_rename_gpu_key("requests.cpu")), r"spec\.hard has no 'requests\.nvidia\.com/gpu'; expected requests\.nvidia\.com/gpu: \d+$"),
    (_hand(lambda o: o["spec"].update(hardd=o["spec"].pop("hard"))),
     r"k8s\.validate \(Kubernetes [\d.]+ schema, strict\) rejects it: ResourceQuota/gpu-quota: spec: "
     r"Additional properties are not allowed \('hardd' was unexpected\)$"),
    (_hand(lambda o: o["spec"]["hard"].update({lab03.GPU_QUOTA_KEY: "1.5"})),
     r"spec\.hard\.requests\.nvidia\.com/gpu: must be a whole number of GPUs, got '1\.5'$"),
    (lambda namespace, gpus: [ref.gpu_quota_by_hand(namespace, gpus)], r"returned list; expected a dict \(one manifest\)$"),
    (lambda namespace, gpus: k8s.to_yaml(ref.gpu_quota_by_hand(namespace, gpus)), r"returned str; expected a dict"),
    (lambda namespace, gpus: ref.gpu_quota_by_hand("team-abcde", 4), r"metadata\.namespace is 'team-abcde'"),
    # found by an attack pass: values and keys the API server refuses, and quotas that cap nothing
    (_hand(lambda o: o["spec"]["hard"].update({lab03.GPU_QUOTA_KEY: "\uff13"})),  # a full-width digit 3
     r"spec\.hard\.requests\.nvidia\.com/gpu: not a Kubernetes quantity"),
    (_hand(lambda o: o["spec"]["hard"].update({"requests.cpu": "lots"})), r"spec\.hard\.requests\.cpu: not a Kubernetes quantity"),
    (_hand(lambda o: o["spec"]["hard"].update({"pods": -5})), r"spec\.hard\.pods: not a Kubernetes quantity"),
    (_hand(lambda o: o["spec"]["hard"].update({"requests.NVIDIA.com/gpu": "999"})),
     r"spec\.hard\.requests\.NVIDIA\.com/gpu: not a resource name"),
    (_hand(lambda o: o["spec"].update(scopes=["Terminating"])), r"spec has scopes or a scopeSelector; a scoped quota"),
    (_hand(lambda o: o["spec"].update(scopeSelector={"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["no-such-class"]}]})), r"scopeSelector"),
    (_hand(lambda o: o.update(status={"hard": {lab03.GPU_QUOTA_KEY: "99"}})), r"has a status; Kubernetes writes"),
])
def test_bad_quota_by_hand_fails_with_its_own_message(fn, message):
    r = verdict("manifest-by-hand", gpu_quota_by_hand=fn)
    assert not r.passed and re.match(r"gpu_quota_by_hand\('team-[a-z0-9]{5}', \d+\): ", r.message), r.message
    found = re.search(message, r.message)
    assert found, r.message
    if found.groups():  # the wrong count: what it was and what was asked for, as numbers
        assert int(found.group(1)) == int(found.group(2)) + 1


def test_quota_by_hand_not_implemented():
    def blank(namespace, gpus):
        raise NotImplementedError
    assert "not implemented yet" in verdict("manifest-by-hand", gpu_quota_by_hand=blank).message


def test_harness_peak_and_options():
    assert tenancy._peak([(0, 1), (1, 2), (0.5, 1.5)]) == 2  # an end at t comes before a start at t
    assert tenancy.check_options(None, "a") == {}
    with pytest.raises(ValueError, match="may only set resources, scheduling_strategy; got num_gpus"):
        tenancy.check_options({"num_gpus": 0}, "a")
    with pytest.raises(ValueError, match="CPU/GPU are set by the harness"):
        tenancy.check_options({"resources": {"GPU": 1}}, "a")


def test_bad_options_fail_before_anything_runs():
    r = verdict("resources-enforced", quota_resources=ref.quota_resources, resource_options=lambda t: {"num_gpus": 0.01})
    assert "may only set resources" in r.message
    r = verdict("resources-enforced", quota_resources=ref.quota_resources,
                resource_options=lambda t: (_ for _ in ()).throw(NotImplementedError()))
    assert "not implemented yet" in r.message
    r = verdict("resources-enforced", quota_resources=lambda q: {"CPU": 4}, resource_options=ref.resource_options)
    assert "custom resources only" in r.message


def test_a_policy_is_plain_data_the_grader_reads_back():
    """Placement groups, as the kernel describes them: bundles and strategy from Ray's own table."""
    s = session(tenant_groups=ref.tenant_groups, group_options=ref.group_options)
    policy = lab03.groups_policy(s)
    assert {t: len(g["bundles"]) for t, g in policy["groups"].items()} == lab03.QUOTAS
    assert all(g["strategy"] == "PACK" for g in policy["groups"].values())
    assert {t: o["group"]["tenant"] for t, o in policy["options"].items()} == {t: t for t in lab03.QUOTAS}


def _leaky_options(tenant):
    """The reference policy, except that tenant c's kernels forgot their tenant resource."""
    return {} if tenant == "c" else ref.resource_options(tenant)


@only_extended("test_no_quota_at_all_fails_isolation_against_the_reference_measured_beside_it")
def test_a_leaking_quota_is_caught_and_named_by_the_grader_harness():
    from course import cluster

    s = session(quota_resources=ref.quota_resources, resource_options=_leaky_options,
                tenant_groups=lambda quotas: (_ for _ in ()).throw(RuntimeError("not written yet")),
                group_options=ref.group_options)
    try:
        leak = s.run("resources-enforced")
        peak = re.search(r"quota leak: tenant c held (\d+) GPUs at once under a flood \(its quota is 4\)", leak.message)
        assert not leak.passed and peak and int(peak.group(1)) > 4, leak.message
        assert "tenant a held" not in leak.message and "tenant b held" not in leak.message
        # the leak costs the enforcement check only: the quiet tenants still keep their throughput
        assert s.run("resources-isolation").passed, s.run("resources-isolation").message
        groups = s.run("groups-enforced")
        assert not groups.passed and "not written yet" in groups.message, groups.message
        assert not s.run("groups-overhead-tier1").passed
    finally:
        cluster.stop()


def test_no_quota_at_all_fails_isolation_against_the_reference_measured_beside_it():
    """Kernels that ask for no tenant resource: the noisy tenant's flood takes the quiet tenants'
    GPUs. Isolation is a ratio to the reference policy run in the same rounds (0.4 in theory:
    a quiet tenant's 4 of the flood's 40 kernels in flight, on 16 GPUs, against 4 alone)."""
    from course import cluster

    s = session(quota_resources=ref.quota_resources, resource_options=lambda tenant: {})
    try:
        iso = s.run("resources-isolation")
        m = re.search(r"tenant ([bc]) kept ([\d.]+)x its solo throughput where the reference policy kept ([\d.]+)x: "
                      r"([\d.]+)x the reference's", iso.message)
        assert not iso.passed and m, iso.message
        assert float(m.group(4)) < lab03.T.isolation_min, iso.message
        assert not s.run("resources-enforced").passed  # the noisy tenant held more than its quota
    finally:
        cluster.stop()


def test_a_run_relative_to_one_that_finished_nothing_is_nan_not_an_error():
    """A machine too busy to finish a kernel inside a window (seen once in CI-like load: the
    lesson's isolation cell divided by zero) gives NaN, which the lesson prints, not a crash."""
    import math

    from course.tenancy import Run

    busy = Run(2.0, {"a": 1}, [("a", 0.0, 0.5, 0.5, True), ("a", 0.5, 1.0, 0.5, True)])
    idle = Run(2.0, {"a": 1}, [("a", 0.0, 3.0, 3.0, False)])
    assert busy.relative_to(busy, "a") == 1.0 and busy.relative_to(busy) == 1.0
    assert math.isnan(busy.relative_to(idle, "a")) and idle.relative_to(busy, "a") == 0.0


# ---------------------------------------------------------------- bursty demand, lending, gangs

def test_idle_gpu_time_while_work_waited_counts_only_what_the_policy_left_idle():
    """Records (tenant, arrived, admitted, started, ended) on a pool of 2: a kernel that arrived at
    0 and was admitted at 1 while no GPU ran left min(2 idle, 1 waiting) × 1 s idle; Ray's start-up
    after admission (1.0 to 1.2) is not the policy's."""
    r = tenancy.Replay(pool=2, kernel_s=1.0, records=[("a", 0.0, 1.0, 1.2, 2.2), ("b", 0.0, 0.0, 0.0, 1.0)])
    assert r.idle_while_waiting() == pytest.approx(1.0 * 1)  # b ran 0-1: 1 idle GPU, 1 kernel waiting
    assert r.makespan() == pytest.approx(2.2) and r.idle_fraction() == pytest.approx(1.0 / (2 * 2.2))
    assert r.wait("a") == pytest.approx(1.2) and r.wait("b") == 0.0 and r.peak("a") == 1


def test_bursty_demand_and_the_three_policies():
    assert tenancy.bursty() == [(0.0, "a", 32), (1.0, "b", 12), (2.0, "c", 8)]
    assert tenancy.fixed()["a"] == {"nominal": 8, "borrowing_limit": 0}
    assert tenancy.shared()["b"] == {"nominal": 0, "borrowing_limit": 16}
    assert ref.lending_policy(lab03.QUOTAS) == tenancy.cohort(lab03.QUOTAS)


@pytest.mark.parametrize("policy, message", [
    (lambda q: tenancy.shared(q), "a cohort lends unused nominal quota, and tenant a's is its quota, 8"),
    (lambda q: {t: {"nominal": v, "borrowing_limit": -1} for t, v in q.items()}, "expected a whole number ≥ 0"),
    (lambda q: {t: {"nominal": v, "borrow": None} for t, v in q.items()}, "expected {'nominal'"),
    (lambda q: {"a": {"nominal": 8, "borrowing_limit": None}}, "expected one entry per tenant"),
    (lambda q: (_ for _ in ()).throw(NotImplementedError()), "not implemented yet"),
])
def test_a_wrong_lending_policy_fails_before_anything_runs(policy, message):
    r = verdict("cohort-recovers", lending_policy=policy)
    assert not r.passed and message in r.message, r.message


@only_extended("tests/test_labs.py grades the solution's cohort and gang checks at full marks, and the calibrate "
               "gate fails the degraded copy (no lending) on cohort-recovers")
def test_cohort_and_gangs_measured_by_the_grader_harness():
    """On a Ray this process starts (as the reference process does): lending nothing recovers
    none of fixed quotas' idle GPU-time; the reference's gangs wait without a partial hold and both
    start, and a gang packed loosely loses the one-node point only. Actors placed one at a time
    on the same GPUs each hold part of their job, and neither job starts."""
    from course import cluster

    s = session(lending_policy=lambda q: tenancy.fixed(q),
                gang_group=lambda k: ref.placement_group([{"GPU": 1}] * k, strategy="PACK"))
    try:
        none = s.run("cohort-recovers")
        assert not none.passed and "lending: under bursty demand fixed quotas left" in none.message, none.message
        assert s.run("gang-all-or-nothing").passed, s.run("gang-all-or-nothing").message
        loose = s.run("gang-one-node")
        assert not loose.passed and "'PACK'" in loose.message and "STRICT_PACK" in loose.message
        m = lab03._gang(s)
        assert m["started"] == 2 and m["partial_bundles"] == 0 and m["free"] == 2 * m["k"] - 2
        split = tenancy.piecemeal(jobs=2, k=4, free=6, timeout_s=5.0)
        assert split["started"] == [] and split["held_gpus"] == 6, split
    finally:
        cluster.stop()
