"""Checks for 03_quotas: per-tenant GPU quotas on Ray, and the same policy as Kubernetes manifests.

All grader-side (see :mod:`autograder.checks`). A quota policy is *data*: the learner's
functions describe it -- custom resources and per-tenant task options, or placement groups
(their bundles and strategy, read from Ray's own placement-group table in the kernel) and
which group each tenant's tasks use -- and the grader runs that policy under its own load
generator (``course.tenancy.run``) in its reference process, on a Ray it starts for that
policy. Every kernel is the harness's own Ray task, which stamps when it held its logical
GPU, so the peak GPUs per tenant, the throughput and the latency are measured where learner
code never runs. Each tenant floods alone once (a leaking quota shows), the noisy tenant
floods while the others keep their quota busy (isolation, against their solo throughput,
interleaved), and everyone saturates the pool with and without the quota (overhead,
interleaved A B B A). Under bursty demand (``course.tenancy.bursty``) the learner's lending policy --
plain data: each tenant's nominal quota and borrowing limit -- is replayed beside fixed quotas and
the reference cohort (GPU-time idle while work waited for admission, from the grader's kernels'
stamps). The learner's gang placement group is read as plain data (bundles, strategy) from Ray's
table in the kernel, made twice on the grader's Ray with fewer GPUs free than both need, and
judged from that Ray's placement-group table. Manifests are validated against the Kubernetes schemas
(``kubernetes-validate``) and the KubeRay/Kueue fields, for the course's quotas and for a
second split of the pool drawn per run; the one ResourceQuota the learner writes by hand is
validated too and read field by field, for namespaces and GPU counts drawn per run.
"""

from __future__ import annotations

import statistics
import string
from typing import TYPE_CHECKING

from course import k8s, tenancy

from . import LAB
from .steps import POOL, QUOTAS, REFERENCE_PREFIX
from .targets import TARGETS as T
from ...transport import Learner, named
from ...checks import register, tiers

if TYPE_CHECKING:
    from ...grader.session.session import Session


def checked_options(opts, tenant: str) -> dict:
    """A tenant's task options, checked (:func:`course.tenancy.check_options`); the reason if not."""
    try:
        return tenancy.check_options(opts, tenant)
    except (TypeError, ValueError) as exc:
        raise AssertionError(str(exc)) from None


def _alt_quotas(session: Session) -> dict:
    """Another split of the pool among the tenants (each ≥ 1), drawn from this run's seed."""
    rng = session.rng(3)
    while True:
        cuts = sorted(rng.sample(range(1, T.pool), len(QUOTAS) - 1))
        parts = [b - a for a, b in zip([0] + cuts, cuts + [T.pool])]
        alt = dict(zip(QUOTAS, parts))
        if alt != QUOTAS:
            return alt


# ---------------------------------------------------------------- policies, as plain data

def resource_policy(side: Learner) -> dict:
    """A custom-resource policy (the learner's, or the reference's): the node's resources and
    each tenant's task options."""
    res = side.call("quota_resources", dict(QUOTAS), what="quota_resources(quotas)", returns="json")
    if not isinstance(res, dict) or not all(isinstance(v, (int, float)) and v >= 0 for v in res.values()):
        raise AssertionError(f"quota_resources returned {str(res)[:80]}; expected a dict of resource name -> amount")
    if any(k in ("CPU", "GPU", "memory", POOL) or str(k).startswith(REFERENCE_PREFIX) for k in res):
        raise AssertionError("quota_resources must name custom resources only (not CPU/GPU/memory, nor the "
                             "grader's own)")
    options = {t: checked_options(side.call("resource_options", t, what=f"resource_options({t!r})",
                                            returns="json"), t)
               for t in QUOTAS}
    return {"resources": res, "options": options}


def groups_policy(session: Session) -> dict:
    """The learner's placement-group policy, checked: one group per tenant, options into groups."""
    policy = session.learner.kit.group_policy(named("tenant_groups"), named("group_options"), dict(QUOTAS),
                                              what="tenant_groups(quotas) and group_options(tenant, groups)",
                                              timeout_s=session.call_timeout_s + T.pg_ready_timeout_s)
    groups, options = policy.get("groups"), policy.get("options")
    if not (isinstance(groups, dict) and set(groups) == set(QUOTAS) and isinstance(options, dict)
            and set(options) == set(QUOTAS)):
        raise AssertionError("tenant_groups / group_options did not describe one group and options per tenant")
    for t, g in groups.items():
        if not (isinstance(g.get("bundles"), list) and all(isinstance(b, dict) for b in g["bundles"])
                and g.get("strategy") in ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")):
            raise AssertionError(f"the placement group of tenant {t} is not one the grader can make again")
    for t, o in options.items():
        group = o.pop("group", None)
        checked_options({k: v for k, v in o.items() if k != "scheduling_strategy"}, t)
        if group is not None and not (group.get("tenant") in QUOTAS and isinstance(group.get("bundle_index"), int)):
            raise AssertionError(f"group_options({t!r}, groups) points at a placement group tenant_groups did not make")
        o["group"] = group
    return {"groups": groups, "options": options}


def _enforced(m: dict, how: str) -> None:
    leaks = [(t, m["peaks"][t], q) for t, q in QUOTAS.items() if m["peaks"][t] > q]
    if leaks:
        t, peak, q = max(leaks, key=lambda x: x[1] - x[2])
        raise AssertionError(
            f"quota leak: tenant {t} held {peak} GPUs at once under a flood (its quota is {q})"
            + "".join(f"; tenant {tt} held {p} (quota {qq})" for tt, p, qq in leaks if tt != t)
            + f" -- its kernels are not limited by {how}")


def _isolated(m: dict) -> None:
    """The quiet tenants' isolation, as a ratio to the reference policy's measured beside it."""
    vs = m["isolation_vs_reference"]
    worst = min(vs, key=vs.get)
    if vs[worst] < T.isolation_min:
        raise AssertionError(
            f"isolation: while tenant {T.noisy} flooded, tenant {worst} kept {m['isolation'][worst]:.2f}x its solo "
            f"throughput where the reference policy kept {m['reference_isolation'].get(worst, 0.0):.2f}x: "
            f"{vs[worst]:.2f}x the reference's (median of {T.rounds} interleaved rounds); needed ≥ "
            f"{T.isolation_min:.2f}x")


def _measured(session: Session, kind: str) -> dict:
    """The grader's measurement of the learner's ``kind`` policy ("resources" or "groups"), once per run."""
    def run():
        if kind == "groups":
            return session.reference.kit.measure_policy(groups_policy(session), what="measuring your groups policy",
                                                        timeout_s=600)
        return session.reference.kit.measure_policy(resource_policy(session.learner), resource_policy(session.reference),
                                                    what="measuring your resources policy", timeout_s=600)
    return session.memo(("policy", kind), run)


@register(LAB, "resources-enforced")
def resources_enforced(session):
    """Custom resources: no tenant ever holds more GPUs than its quota, each flooding alone and together."""
    _enforced(_measured(session, "resources"), "its tenant resource")


@register(LAB, "resources-isolation", timed=True)
def resources_isolation(session):
    """Custom resources: the quiet tenants keep their throughput while the noisy one floods."""
    _isolated(_measured(session, "resources"))


def _overhead_tiers(kind: str, names: tuple, thresholds: tuple, how: str) -> None:
    class Overhead(dict):
        ratio = property(lambda self: self["overhead"])

    def explain(m, need):
        a, b = m["totals"][0]
        return (f"overhead: with {how} the saturated pool ran {m['overhead']:.2f}x the kernels/s of no quotas "
                f"(e.g. {a:.1f} vs {b:.1f}/s, interleaved); this tier needs ≥ {need:.2f}x")

    tiers(LAB, names, thresholds, lambda session: Overhead(_measured(session, kind)), explain)


_overhead_tiers("resources", ("resources-overhead-tier1", "resources-overhead-tier2"), T.overhead_tiers,
                "custom-resource quotas")


@register(LAB, "groups-enforced")
def groups_enforced(session):
    """Placement groups: no tenant ever holds more GPUs than its quota."""
    _enforced(_measured(session, "groups"), "its placement group")


_overhead_tiers("groups", ("groups-overhead-tier1", "groups-overhead-tier2"), T.groups_overhead_tiers,
                "placement-group quotas")


# ---------------------------------------------------------------- lending within a cohort

def lending_policy(side: Learner) -> dict:
    """A side's lending policy (``lending_policy(quotas)``), checked: each tenant's nominal quota is
    its quota, and its borrowing limit a whole number ≥ 0 or None (no limit)."""
    got = side.call("lending_policy", dict(QUOTAS), what="lending_policy(quotas)", returns="json")
    if not isinstance(got, dict) or set(got) != set(QUOTAS):
        raise AssertionError(f"lending_policy(quotas) returned {str(got)[:80]}; expected one entry per tenant "
                             f"{sorted(QUOTAS)}")
    out = {}
    for t, q in QUOTAS.items():
        entry = got[t]
        if not isinstance(entry, dict) or set(entry) - {"nominal", "borrowing_limit"}:
            raise AssertionError(f"lending_policy(quotas)[{t!r}] is {str(entry)[:60]}; expected "
                                 "{'nominal': ..., 'borrowing_limit': ...}")
        nominal, limit = entry.get("nominal"), entry.get("borrowing_limit")
        if nominal != q or isinstance(nominal, bool):
            raise AssertionError(f"lending_policy(quotas)[{t!r}]['nominal'] is {nominal!r}; a cohort lends unused "
                                 f"nominal quota, and tenant {t}'s is its quota, {q}")
        if limit is not None and not (isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0):
            raise AssertionError(f"lending_policy(quotas)[{t!r}]['borrowing_limit'] is {limit!r}; expected a whole "
                                 "number ≥ 0, or None for no limit")
        out[t] = {"nominal": nominal, "borrowing_limit": limit}
    return out


def _cohort(session: Session):
    """Fixed quotas, the learner's lending policy and the reference's, replayed side by side."""
    class Recovered(dict):
        ratio = property(lambda self: self["recovered_vs_reference"])

    m = session.reference.kit.measure_cohort(lending_policy(session.learner), lending_policy(session.reference),
                                             what="replaying bursty demand under your lending policy",
                                             timeout_s=300)
    med = {k: statistics.median(v) for k, v in m["idle"].items()}
    best = med["fixed"] - med["reference"]
    m["median"] = med
    m["recovered_vs_reference"] = (med["fixed"] - med["learner"]) / best if best > 0 else 0.0
    return Recovered(m)


def _cohort_explain(m, need):
    med = m["median"]
    return (f"lending: under bursty demand fixed quotas left {med['fixed']:.0%} of the pool idle while work waited, "
            f"your policy {med['learner']:.0%}, the reference cohort {med['reference']:.0%} (median of "
            f"{T.cohort_rounds} interleaved rounds): yours recovered {m.ratio:.2f}x what the reference did; this "
            f"tier needs ≥ {need:.2f}x")


tiers(LAB, ("cohort-recovers",), T.cohort_tiers, _cohort, _cohort_explain)


# ---------------------------------------------------------------- gang scheduling

def _gang(session: Session) -> dict:
    """The learner's gang group for a k drawn per run, and two of them racing on 2k - 2 GPUs,
    measured from the placement-group table of the grader's Ray."""
    def run():
        k = session.rng(17).choice(T.gang_sizes)
        spec = session.learner.kit.gang_spec(named("gang_group"), k, what=f"gang_group({k})",
                                             timeout_s=session.call_timeout_s + T.pg_ready_timeout_s)
        bundles = spec.get("bundles") if isinstance(spec, dict) else None
        if not (isinstance(bundles, list) and len(bundles) == k
                and all(isinstance(b, dict) and b.get("GPU") == 1 for b in bundles)):
            raise AssertionError(f"gang_group({k}) reserves bundles {str(bundles)[:80]}; expected {k} bundles of "
                                 "one GPU each")
        got = session.reference.kit.measure_gang(spec, k, what="two gangs racing for the GPUs",
                                                 timeout_s=T.gang_timeout_s + 120)
        return {"k": k, "spec": spec, **got}
    return session.memo("gang", run)


@register(LAB, "gang-all-or-nothing")
def gang_all_or_nothing(session):
    """Two gangs of k GPUs on 2k - 2 free GPUs: the waiting one holds no bundle, and both start."""
    m = _gang(session)
    if m["partial_bundles"]:
        raise AssertionError(f"a gang of {m['k']} GPUs held {m['partial_bundles']} of its bundles while it waited "
                             f"(Ray's placement-group table): a partial hold")
    if m["started"] < 2:
        raise AssertionError(f"two gangs of {m['k']} GPUs on {m['free']} free GPUs: {m['started']} of 2 started within "
                             f"{T.gang_timeout_s:g} s")
    return (f"gangs of {m['k']} on {m['free']} GPUs: created at {m['created_s']} s, no bundle held while waiting "
            "(placement-group table)")


@register(LAB, "gang-one-node")
def gang_one_node(session):
    """The gang's placement group keeps all its bundles on one node (STRICT_PACK)."""
    strategy = _gang(session)["spec"].get("strategy")
    if strategy != "STRICT_PACK":
        raise AssertionError(f"gang_group's placement group has strategy {strategy!r} (Ray's placement-group table); "
                             "a job whose GPUs talk over NVLink needs them all on one node: STRICT_PACK")


# ---------------------------------------------------------------- a ResourceQuota by hand

GPU_QUOTA_KEY = f"requests.{k8s.GPU}"
REQUESTS_ONLY = ('kubernetes.io "Resource Quotas": for extended resources "only quota items with prefix '
                 'requests. are allowed"')


def _hand_cases(session: Session) -> list[tuple[str, int]]:
    """Two (namespace, GPUs) cases drawn from this run's seed, differing in both: a namespace
    ``team-`` plus five letters or digits (a valid DNS label), a GPU count from 1 to the pool."""
    rng = session.rng(13)
    cases: list[tuple[str, int]] = []
    while len(cases) < 2:
        ns = "team-" + "".join(rng.choices(string.ascii_lowercase + string.digits, k=5))
        gpus = rng.randint(1, T.pool)
        if all(ns != n and gpus != g for n, g in cases):
            cases.append((ns, gpus))
    return cases


def _check_quota(obj, ns: str, gpus: int) -> None:
    """One hand-written ResourceQuota, field by field; raises one line naming the field.

    apiVersion and kind first (the schema's own message for those is vaguer), then the GPU keys
    a quota may not hold, then :func:`course.k8s.validate` (the strict schema catches a misspelt
    field; it also requires metadata.name and metadata.namespace), then the values.
    """
    if not isinstance(obj, dict):
        raise AssertionError(f"returned {type(obj).__name__}; expected a dict (one manifest)")
    for field, want in (("apiVersion", "v1"), ("kind", "ResourceQuota")):
        if obj.get(field) != want:
            raise AssertionError(f"{field} is {obj.get(field)!r}; expected {want!r}")
    spec = obj.get("spec")
    hard = spec.get("hard") if isinstance(spec, dict) else None
    if "status" in obj:
        raise AssertionError("has a status; Kubernetes writes an object's status, a manifest leaves it out")
    if isinstance(spec, dict) and k8s.scoped(obj):
        raise AssertionError("spec has scopes or a scopeSelector; a scoped quota counts only the pods it matches "
                             "(kubernetes.io \"Resource Quotas\", \"Quota Scopes\"), and this one must cap every GPU "
                             "request in the namespace")
    for key in (f"limits.{k8s.GPU}", k8s.GPU):
        if isinstance(hard, dict) and key in hard:
            raise AssertionError(f"spec.hard has {key!r}; expected {GPU_QUOTA_KEY!r} ({REQUESTS_ONLY})")
    try:
        k8s.validate(obj)
    except k8s.ManifestError as exc:
        raise AssertionError(f"k8s.validate (Kubernetes {k8s.K8S_VERSION} schema, strict) rejects it: {exc}") from None
    meta = obj["metadata"]
    if meta.get("namespace") != ns:
        raise AssertionError(f"metadata.namespace is {meta.get('namespace')!r}; expected {ns!r}, the namespace asked for")
    if not isinstance(hard, dict) or GPU_QUOTA_KEY not in hard:
        raise AssertionError(f"spec.hard has no {GPU_QUOTA_KEY!r}; expected {GPU_QUOTA_KEY}: {gpus}")
    if k8s.whole_number(hard[GPU_QUOTA_KEY]) != gpus:
        raise AssertionError(f"spec.hard[{GPU_QUOTA_KEY!r}] is {hard[GPU_QUOTA_KEY]!r}; expected {gpus}, the GPUs asked for")


@register(LAB, "manifest-by-hand")
def manifest_by_hand(session):
    """The learner's hand-written ResourceQuota: valid (strict schema) and right field by field,
    for two namespaces and GPU counts drawn per run."""
    for ns, gpus in _hand_cases(session):
        what = f"gpu_quota_by_hand({ns!r}, {gpus})"
        obj = session.learner.call("gpu_quota_by_hand", ns, gpus, what=what, returns="json")
        try:
            _check_quota(obj, ns, gpus)
        except AssertionError as exc:
            raise AssertionError(f"{what}: {exc}") from None


# ---------------------------------------------------------------- manifests

def measure_manifests(session: Session) -> list:
    """The learner's manifests (plain data) for the course quotas and for a seeded other split."""
    out = []
    for quotas in (dict(QUOTAS), _alt_quotas(session)):
        objs = session.learner.call("tenant_manifests", quotas, what=f"tenant_manifests({quotas})",
                                    returns="json")
        if not isinstance(objs, list) or not objs or not all(isinstance(o, dict) for o in objs):
            raise AssertionError(f"tenant_manifests({quotas}) returned {type(objs).__name__}; "
                                 "expected a non-empty list of manifests (dicts)")
        out.append((quotas, objs))
    return out


def _manifests(session: Session) -> list:
    return session.memo(measure_manifests, lambda: measure_manifests(session))


@register(LAB, "manifests-valid")
def manifests_valid(session):
    """Every manifest passes the Kubernetes schemas (strict) or the KubeRay/Kueue field checks."""
    for quotas, objs in _manifests(session):
        try:
            k8s.validate_all(objs)
        except k8s.ManifestError as exc:
            raise AssertionError(f"for quotas {quotas}: {exc}") from None


@register(LAB, "manifests-quotas")
def manifests_quotas(session):
    """One ResourceQuota per tenant namespace with requests.nvidia.com/gpu = its quota; they sum to the pool."""
    for quotas, objs in _manifests(session):
        got = k8s.gpu_quota(objs)
        for t, q in quotas.items():
            if got.get(f"tenant-{t}") != q:
                raise AssertionError(f"for quotas {quotas}: namespace tenant-{t} has requests.{k8s.GPU} "
                                     f"{got.get(f'tenant-{t}')} in its ResourceQuota; expected {q}")
        total = sum(got.get(f"tenant-{t}", 0) for t in quotas)
        if total != T.pool:
            raise AssertionError(f"for quotas {quotas}: the tenants' GPU quotas sum to {total}, not the pool of {T.pool}")


@register(LAB, "manifests-gpu-limits")
def manifests_gpu_limits(session):
    """GPU workers set whole-number nvidia.com/gpu limits; each namespace caps GPUs per container."""
    for quotas, objs in _manifests(session):
        for t in quotas:
            ns = f"tenant-{t}"
            if not any(o["metadata"].get("namespace") == ns for o in k8s.by_kind(objs, "LimitRange")):
                raise AssertionError(f"for quotas {quotas}: namespace {ns} has no LimitRange")
        for rc in k8s.by_kind(objs, "RayCluster"):
            for g in (rc.get("spec") or {}).get("workerGroupSpecs") or []:
                for c in ((g.get("template") or {}).get("spec") or {}).get("containers") or []:
                    value = ((c.get("resources") or {}).get("limits") or {}).get(k8s.GPU)
                    if k8s.whole_number(value) is None or k8s.whole_number(value) < 1:
                        raise AssertionError(
                            f"for quotas {quotas}: RayCluster {rc['metadata'].get('namespace')}/"
                            f"{rc['metadata'].get('name')} worker group {g.get('groupName')!r} sets "
                            f"limits {k8s.GPU} = {value!r}; GPU workers need a whole number ≥ 1 in limits")


@register(LAB, "manifests-fit")
def manifests_fit(session):
    """Each tenant's RayCluster fits its quota and is queued in a Kueue LocalQueue whose ClusterQueue has that quota."""
    for quotas, objs in _manifests(session):
        queues = k8s.queue_gpus(objs)
        local = {(o["metadata"].get("namespace"), o["metadata"].get("name")): (o.get("spec") or {}).get("clusterQueue")
                 for o in k8s.by_kind(objs, "LocalQueue")}
        for t, q in quotas.items():
            ns = f"tenant-{t}"
            rcs = [o for o in k8s.by_kind(objs, "RayCluster") if o["metadata"].get("namespace") == ns]
            if not rcs:
                raise AssertionError(f"for quotas {quotas}: no RayCluster in namespace {ns}")
            for rc in rcs:
                need = k8s.raycluster_max_gpus(rc)
                if need > q:
                    raise AssertionError(f"for quotas {quotas}: RayCluster {ns}/{rc['metadata']['name']} can "
                                         f"hold {need} GPUs at maxReplicas; the quota of {ns} is {q}")
                label = (rc["metadata"].get("labels") or {}).get(k8s.QUEUE_LABEL)
                if (ns, label) not in local:
                    raise AssertionError(f"for quotas {quotas}: RayCluster {ns}/{rc['metadata']['name']} has "
                                         f"{k8s.QUEUE_LABEL}={label!r}, not a LocalQueue in {ns}")
                cq = local[(ns, label)]
                if queues.get(cq) != q:
                    raise AssertionError(f"for quotas {quotas}: LocalQueue {ns}/{label} points at ClusterQueue "
                                         f"{cq!r} with {queues.get(cq)} GPUs; expected {q}")


def _rounded(ratios: dict) -> dict:
    return {k: round(v, 2) for k, v in ratios.items()}


def _no_quota(tenant: str) -> dict:
    """A policy's options that forget every tenant resource: no quota at all (calibration)."""
    return {}


def calibrate(session: Session) -> list[str]:
    """The reference's isolation and overhead on this machine, for both mechanisms, and the
    isolation bar's margin: the reference against itself, and no quota at all against it."""
    cr, pg = _measured(session, "resources"), _measured(session, "groups")
    # a session like this one (its class: checks import nothing of the grader's at run time)
    leaky = type(session)(session.lab, learner=Learner(namespace={**session.answers(), "resource_options": _no_quota}))
    none = _measured(leaky, "resources")
    co = _cohort(session)
    return [f"lending (bursty demand): idle fraction {_rounded(co['median'])}, waits {co['waits']}",
            f"custom resources: peaks {cr['peaks']}, isolation {cr['isolation']}, overhead {cr['overhead']:.2f}",
            f"placement groups: peaks {pg['peaks']}, overhead {pg['overhead']:.2f}",
            f"isolation vs the reference policy, side by side: the reference {_rounded(cr['isolation_vs_reference'])}, "
            f"no quota at all {_rounded(none['isolation_vs_reference'])} (isolation {_rounded(none['isolation'])}; "
            f"the reference's beside it {_rounded(none['reference_isolation'])})",
            f"tiers: isolation ≥ {T.isolation_min}x the reference's, overhead {T.overhead_tiers}, "
            f"groups {T.groups_overhead_tiers}, cohort {T.cohort_tiers}"]
