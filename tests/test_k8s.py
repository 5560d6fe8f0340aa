"""course.k8s: the builders produce manifests the real Kubernetes schemas accept (kubernetes-validate,
offline), and broken manifests are rejected with a message that says where and why."""

from __future__ import annotations

import copy

import pytest
import yaml

from course import k8s


def policy():
    objs = [k8s.resource_flavor()]
    for t, q in {"a": 8, "b": 4, "c": 4}.items():
        ns = f"tenant-{t}"
        objs += [k8s.namespace(ns), k8s.resource_quota(ns, q), k8s.limit_range(ns, q),
                 k8s.cluster_queue(ns, q, namespaces=[ns]), k8s.local_queue(ns, ns),
                 k8s.ray_cluster("ray", ns, workers=q, queue="gpu-queue")]
    return objs


def test_builders_are_valid_and_round_trip_through_yaml():
    objs = policy()
    assert k8s.validate_all(objs) == objs
    docs = list(yaml.safe_load_all(k8s.to_yaml(objs)))
    assert docs == objs
    assert k8s.gpu_quota(objs) == {"tenant-a": 8, "tenant-b": 4, "tenant-c": 4}
    assert k8s.queue_gpus(objs) == {"tenant-a": 8, "tenant-b": 4, "tenant-c": 4}
    rc = k8s.by_kind(objs, "RayCluster")[0]
    assert k8s.raycluster_max_gpus(rc) == 8
    multi = {**rc, "spec": {**rc["spec"], "workerGroupSpecs": [{**g, "numOfHosts": 2} for g in rc["spec"]["workerGroupSpecs"]]}}
    head = k8s._pod_gpus(rc["spec"]["headGroupSpec"]["template"])
    assert k8s.raycluster_max_gpus(multi) == head + 2 * (8 - head)  # each replica of a multi-host group is 2 pods
    assert rc["metadata"]["labels"] == {k8s.QUEUE_LABEL: "gpu-queue"}
    worker = rc["spec"]["workerGroupSpecs"][0]
    assert {"groupName", "replicas", "minReplicas", "maxReplicas", "rayStartParams", "template"} <= set(worker)
    assert worker["template"]["spec"]["containers"][0]["resources"]["limits"][k8s.GPU] == "1"


def test_kubernetes_validate_is_the_real_schema():
    import kubernetes_validate

    assert kubernetes_validate.validate(k8s.resource_quota("x", 2), k8s.K8S_VERSION, strict=True) is not None


def _rc():
    return k8s.ray_cluster("ray", "tenant-b", workers=4)


def _worker_container(rc):
    return rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]


def _bad_cases():
    quota_typo = k8s.resource_quota("tenant-b", 4)
    quota_typo["spec"] = {"hardd": quota_typo["spec"]["hard"]}
    limits_quota = k8s.resource_quota("tenant-b", 4)
    limits_quota["spec"]["hard"] = {"limits.nvidia.com/gpu": "4"}
    fractional = _rc()
    _worker_container(fractional)["resources"]["limits"][k8s.GPU] = "0.5"
    typo_field = _rc()
    _worker_container(typo_field)["imagee"] = "x"
    no_head = _rc()
    del no_head["spec"]["headGroupSpec"]
    replicas = _rc()
    replicas["spec"]["workerGroupSpecs"][0]["replicas"] = 9
    no_group = _rc()
    del no_group["spec"]["workerGroupSpecs"][0]["groupName"]
    old_api = _rc()
    old_api["apiVersion"] = "ray.io/v1alpha1"
    cq = k8s.cluster_queue("q", 4)
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    lq = k8s.local_queue("tenant-b", "q")
    del lq["spec"]["clusterQueue"]
    bad_name = k8s.namespace("Tenant_B")
    return [
        (quota_typo, r"ResourceQuota/gpu-quota: spec: Additional properties .*'hardd'"),
        (limits_quota, r"only the requests\. prefix"),
        (fractional, r"RayCluster/ray: spec\.workerGroupSpecs\[0\]\.template\.spec\.containers\[0\].*whole number"),
        (typo_field, r"RayCluster/ray: spec\.workerGroupSpecs\[0\]\.template\.spec\.containers\.0: .*'imagee'"),
        (no_head, r"missing required field 'headGroupSpec'"),
        (replicas, r"replicas 9 outside \[minReplicas 0, maxReplicas 4\]"),
        (no_group, r"missing required field 'groupName'"),
        (old_api, r"expected 'ray\.io/v1'"),
        (cq, r"ClusterQueue/q: .*must list the coveredResources"),
        (lq, r"LocalQueue/gpu-queue: spec: missing required field 'clusterQueue'"),
        (bad_name, r"Namespace/Tenant_B"),
        ({"kind": "Deployment"}, r"needs apiVersion and kind"),
        ({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}, r"no schema"),
    ]


@pytest.mark.parametrize("obj,message", _bad_cases())
def test_invalid_manifests_are_rejected_with_a_clear_message(obj, message):
    with pytest.raises(k8s.ManifestError, match=message) as info:
        k8s.validate(obj)
    assert "\n" not in str(info.value)


def test_validate_does_not_change_the_manifest():
    rc = _rc()
    before = copy.deepcopy(rc)
    k8s.validate(rc)
    assert rc == before


def test_kuberays_own_spec_fields_are_accepted():
    """KubeRay v1.7.0's RayClusterSpec (ray-operator/apis/ray/v1/raycluster_types.go) has authOptions and
    upgradeStrategy (from v1.6.0): lab 03 names spec.authOptions as the way to turn token auth on."""
    rc = _rc()
    rc["spec"]["authOptions"] = {"mode": "token"}
    rc["spec"]["upgradeStrategy"] = {"type": "Recreate"}
    assert k8s.validate(rc) is rc
    rc["spec"]["authOptionz"] = {"mode": "token"}
    with pytest.raises(k8s.ManifestError, match=r"unknown field\(s\) authOptionz"):
        k8s.validate(rc)


def test_whole_number():
    assert [k8s.whole_number(v) for v in (2, "3", "0.5", 1.0, True, None)] == [2, 3, None, None, None, None]


def test_signatures_show_every_builder_and_its_keywords():
    """What lab 03 prints before its manifest exercises: the keywords a learner needs are there."""
    text = k8s.signatures()
    assert [ln.split("(")[0] for ln in text.splitlines()[::2]] == [f"k8s.{b}" for b in k8s.BUILDERS]
    for keyword in ("queue: str | None = None", "namespaces: list[str] | None = None", "max_gpus_per_container: int"):
        assert keyword in text
    assert "'str'" not in text  # annotations evaluated, not shown as strings


def test_the_capstone_job_as_an_indexed_job_and_a_rayjob_validates():
    job = k8s.indexed_job("c8-inference", "team-a", "registry.example/infer:1", completions=200, parallelism=50)
    rayjob = k8s.ray_job("c8-inference", "team-a", "python infer.py", workers=200)
    assert [m["kind"] for m in k8s.validate_all([job, rayjob])] == ["Job", "RayJob"]
    assert job["spec"]["completionMode"] == "Indexed"
    bad = {**rayjob, "spec": {k: v for k, v in rayjob["spec"].items() if k != "entrypoint"}}
    with pytest.raises(k8s.ManifestError, match="entrypoint"):
        k8s.validate(bad)
    with pytest.raises(k8s.ManifestError, match="parallelism"):
        k8s.validate({**job, "spec": {**job["spec"], "parallelism": "many"}})


def test_kueue_objects_are_v1beta2_and_checked_against_kueues_own_schema():
    """Kueue 0.16 stores v1beta2 and deprecates v1beta1 (its CHANGELOG-0.16.md); the builders
    emit v1beta2, checked strictly against Kueue's v1beta2 CRD schema (course/kueue_schema.py)."""
    objs = [k8s.resource_flavor(), k8s.cluster_queue("tenant-a", 8, namespaces=["tenant-a"]),
            k8s.local_queue("tenant-a", "tenant-a")]
    assert {o["apiVersion"] for o in objs} == {"kueue.x-k8s.io/v1beta2"} == {k8s.KUEUE_API}
    k8s.validate_all(objs)
    lending = k8s.cluster_queue("tenant-a", 8)
    lending["spec"]["cohortName"] = "gpus"
    lending["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["borrowingLimit"] = "8"
    k8s.validate(lending)
    old = k8s.cluster_queue("tenant-a", 8)
    old["spec"]["cohort"] = "gpus"  # v1beta1's name for it
    with pytest.raises(k8s.ManifestError, match=r"spec: Additional properties are not allowed \('cohort' was "
                                                r"unexpected\) \(Kueue's kueue.x-k8s.io/v1beta2 schema\)"):
        k8s.validate(old)
    local = k8s.local_queue("tenant-a", "tenant-a")
    local["spec"]["clusterQueue"] = "Not_A_Name"
    with pytest.raises(k8s.ManifestError, match=r"spec.clusterQueue: .*Kueue's"):
        k8s.validate(local)
    k8s.validate({**k8s.resource_flavor(), "apiVersion": "kueue.x-k8s.io/v1beta1"})  # still served, deprecated
