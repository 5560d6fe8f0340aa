"""Lab 03 through real nbgrader: a submission whose custom-resource quota leaks for one tenant,
whose placement groups crash and whose RayClusters ask for half a GPU loses exactly those
checks' points, and the leak is reported with the tenant's name and the peak it reached --
although its kernel replaces the peak counter, the kernel task, the enforcement check and the
measurement step so that every measurement made there would say "no leak".

(The solution's full marks and the blank lab's zero are tests/test_labs.py's.)
"""

from __future__ import annotations

import re

import pytest

from autograder import selfcheck
from notebooks import variant

LAB = "03_quotas"

LEAKY = '''
def quota_resources(quotas):
    return {f"tenant_{t}": q for t, q in quotas.items()}


def resource_options(tenant):
    if tenant == "c":          # forgot the tenant resource on this path
        return {}
    return {"resources": {f"tenant_{tenant}": 1}}


# ... and make every measurement in this kernel say that no tenant exceeded its quota
from autograder.checks import lab03 as _lab03
tenancy.Run.peak = lambda self, tenant=None: 1
tenancy.gpu_kernel = tenancy.gpu_kernel.options(num_gpus=0)
_lab03._enforced = lambda m, how: None
_lab03.measure_policy = lambda policy: {"peaks": {"a": 1, "b": 1, "c": 1}, "bursts": {}, "isolation": {"b": 1.0, "c": 1.0},
                                        "flood": {}, "overhead": 1.0, "totals": [[1.0, 1.0]]}
'''

CRASHING_GROUPS = '''
def tenant_groups(quotas):
    raise RuntimeError("my placement groups are not written yet")


def group_options(tenant, groups):
    return {}
'''

HALF_GPU = '''
def tenant_manifests(quotas):
    objs = [k8s.resource_flavor()]
    for t, q in quotas.items():
        ns = f"tenant-{t}"
        rc = k8s.ray_cluster("ray", ns, workers=q, queue="gpu-queue")
        rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "0.5"
        objs += [k8s.namespace(ns), k8s.resource_quota(ns, q), k8s.limit_range(ns, q),
                 k8s.cluster_queue(ns, q, namespaces=[ns]), k8s.local_queue(ns, ns), rc]
    return objs
'''

LOST = {"resources-enforced": 2, "groups-enforced": 2, "groups-overhead-tier1": 1, "groups-overhead-tier2": 1,
        "manifests-valid": 2, "manifests-gpu-limits": 1}


@pytest.mark.slow
def test_leaking_quota_loses_exactly_its_points(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_SEED", "4242")
    monkeypatch.setenv("AUTOGRADER_CALL_TIMEOUT_S", "30")
    nb = variant(LAB, tmp_path / f"{LAB}.ipynb", replace={
        "resource_quotas": LEAKY, "group_quotas": CRASHING_GROUPS, "tenant_manifests": HALF_GPU}, demos=False)
    outcome = selfcheck.grade_notebook(nb, LAB, cell_timeout_s=240)
    assert not outcome.error
    results = {r.name: r for r in outcome.results}
    failed = {n: r.max_score for n, r in results.items() if not r.passed}
    assert failed == LOST, {n: r.message for n, r in results.items() if not r.passed}
    assert outcome.score == outcome.max_score - sum(LOST.values())
    leak = results["resources-enforced"].message
    peak = re.search(r"quota leak: tenant c held (\d+) GPUs at once under a flood \(its quota is 4\)", leak)
    assert peak and int(peak.group(1)) > 4, leak
    assert "placement groups" in results["groups-enforced"].message or "tenant_groups" in results["groups-enforced"].message
    assert "whole number" in results["manifests-valid"].message
