"""Checks for 03_quotas: per-tenant GPU quotas on Ray, and the same policy as Kubernetes manifests.

The grader runs the learner's quota set-up under its own load generator
(``course.tenancy.run``): every kernel is the harness's own Ray task, which stamps when it
held its logical GPU, so the peak concurrent GPUs per tenant, the throughput and the latency
are measured by the grader, never read from the learner. Each tenant floods alone once (any
tenant whose quota leaks shows it), the noisy tenant floods while the others keep their quota
busy (isolation, against their solo throughput, interleaved), and everyone saturates the pool
with and without the quota (overhead, interleaved A B B A). Manifests are validated against
the Kubernetes schemas (``kubernetes-validate``) and the KubeRay/Kueue fields, for the course's
quotas and for a second split of the pool drawn per run (``AUTOGRADER_SEED`` fixes it).
"""

from __future__ import annotations

import os
import random
import statistics

from course import k8s, tenancy

from .. import harness
from ..targets import LAB03 as T
from . import register

LAB = "03_quotas"
SEED = int(os.environ.get("AUTOGRADER_SEED") or random.SystemRandom().randrange(2**31))
QUOTAS = dict(T.quotas)


def _alt_quotas() -> dict:
    """Another split of the pool among the tenants (each ≥ 1), drawn from the seed."""
    rng = random.Random(SEED * 1000 + 3)
    while True:
        cuts = sorted(rng.sample(range(1, T.pool), len(QUOTAS) - 1))
        parts = [b - a for a, b in zip([0] + cuts, cuts + [T.pool])]
        alt = dict(zip(QUOTAS, parts))
        if alt != QUOTAS:
            return alt


def _runner(options):
    def go(demand, seconds):
        try:
            return tenancy.run(options, demand, seconds=seconds, drain_timeout_s=20)
        except (TypeError, ValueError, TimeoutError) as exc:
            raise AssertionError(f"running the tenants' kernels failed: {exc}") from None
    return go


def _measure(go) -> dict:
    """Enforcement bursts, isolation rounds and overhead rounds with one policy ``go``.

    The no-quota reference saturates whatever GPUs no placement group holds: the whole pool
    for custom resources, the spare half for placement groups (:func:`measure_groups`).
    """
    peaks = {t: 0 for t in QUOTAS}
    bursts = {}

    def note(r):
        for t in r.tenants():
            peaks[t] = max(peaks[t], r.peak(t))
        return r

    note(go(tenancy.saturate(QUOTAS), 0.5))  # warm-up, discarded (its peaks still count)
    for t in QUOTAS:
        r = note(go({t: 2 * T.pool}, T.burst_s))
        bursts[t] = r.peak(t)
    quiet = [t for t in QUOTAS if t != T.noisy]
    iso = {t: [] for t in quiet}
    for rnd in range(T.rounds):
        order = ("solo", "flood") if rnd % 2 == 0 else ("flood", "solo")
        got = {}
        for kind in order:
            demand = tenancy.quiet(QUOTAS, T.noisy) if kind == "solo" else tenancy.flood(QUOTAS, T.noisy, T.flood_factor)
            got[kind] = note(go(demand, T.phase_s))
        for t in quiet:
            solo = got["solo"].throughput(t)
            iso[t].append(got["flood"].throughput(t) / solo if solo else 0.0)
        flood_summary = got["flood"].summary()
    ratios, totals = [], []
    none = _runner(None)
    for rnd in range(T.rounds):
        order = ("quota", "none") if rnd % 2 == 0 else ("none", "quota")
        got = {}
        for kind in order:
            if kind == "none":
                got[kind] = none(tenancy.saturate(QUOTAS), T.phase_s)
            else:
                got[kind] = note(go(tenancy.saturate(QUOTAS), T.phase_s))
        a, b = got["quota"].throughput(), got["none"].throughput()
        ratios.append(a / b if b else 0.0)
        totals.append((a, b))
    return {"peaks": peaks, "bursts": bursts,
            "isolation": {t: statistics.median(v) for t, v in iso.items()},
            "flood": flood_summary, "overhead": statistics.median(ratios), "totals": totals}


_cr: dict = {}
_pg: dict = {}
_mf: dict = {}


def measure_resources(quota_resources, resource_options) -> dict:
    """Custom-resource quotas, measured once per pair of learner functions."""

    def run():
        res = harness.call(quota_resources, dict(QUOTAS), what="quota_resources(quotas)",
                           timeout_s=T.call_timeout_s)
        if not isinstance(res, dict) or not all(isinstance(v, (int, float)) and v >= 0 for v in res.values()):
            raise AssertionError(f"quota_resources returned {res!r}; expected a dict of resource name -> amount")
        if any(k in ("CPU", "GPU", "memory") for k in res):
            raise AssertionError("quota_resources must name custom resources only (not CPU/GPU/memory)")
        opts = {t: harness.call(resource_options, t, what=f"resource_options({t!r})", timeout_s=T.call_timeout_s)
                for t in QUOTAS}
        try:
            opts = {t: tenancy.check_options(o, t) for t, o in opts.items()}
        except (TypeError, ValueError) as exc:
            raise AssertionError(str(exc)) from None
        try:
            tenancy.start(res, pool=T.pool)
        except Exception as exc:  # noqa: BLE001 -- a bad resource dict can make ray.init fail
            raise AssertionError(f"Ray would not start with quota_resources' {res!r}: {exc}") from None
        return _measure(_runner(opts))

    return harness.memo(_cr, (quota_resources, resource_options), run)


def _new_groups(before: set) -> list:
    import ray
    from ray.util.placement_group import PlacementGroup

    table = ray.util.placement_group_table()
    return [PlacementGroup(ray.PlacementGroupID(bytes.fromhex(pid))) for pid, info in table.items()
            if pid not in before and info.get("state") != "REMOVED"]


def measure_groups(tenant_groups, group_options) -> dict:
    """Placement-group quotas, measured once per pair of learner functions."""
    import ray

    def make():
        before = set(ray.util.placement_group_table())
        groups = harness.call(tenant_groups, dict(QUOTAS), what="tenant_groups(quotas)", timeout_s=T.call_timeout_s)
        made = _new_groups(before)
        if not isinstance(groups, dict) or set(groups) != set(QUOTAS):
            tenancy.remove_groups(made)
            raise AssertionError(f"tenant_groups returned {type(groups).__name__} "
                                 f"{sorted(groups) if isinstance(groups, dict) else ''}; expected one "
                                 f"placement group per tenant {sorted(QUOTAS)}")
        try:
            harness.call(ray.get, [g.ready() for g in groups.values()], timeout=T.pg_ready_timeout_s,
                         what="waiting for the placement groups", timeout_s=T.pg_ready_timeout_s + 5)
        except AssertionError:
            tenancy.remove_groups(made)
            raise AssertionError(f"tenant_groups' placement groups were not all ready within "
                                 f"{T.pg_ready_timeout_s:g} s: do they ask for more than the pool of "
                                 f"{T.pool} GPUs?") from None
        opts = {t: harness.call(group_options, t, groups, what=f"group_options({t!r}, groups)",
                                timeout_s=T.call_timeout_s) for t in QUOTAS}
        try:
            opts = {t: tenancy.check_options(o, t) for t, o in opts.items()}
        except (TypeError, ValueError) as exc:
            tenancy.remove_groups(made)
            raise AssertionError(str(exc)) from None
        return made, opts

    def run():
        # Twice the pool: the groups reserve one half, the no-quota reference runs on the other,
        # so no group is removed mid-measurement (a task can be stranded on a removed group).
        tenancy.start(tenancy.tenant_resources(None) if ray.is_initialized() else None,
                      pool=T.pool, spare=T.pool)
        made, opts = make()
        try:
            go = _runner(lambda t: opts[t])
            go(tenancy.saturate(QUOTAS), 0.5)  # new groups start cold: warm them, discarded
            return _measure(go)
        finally:
            tenancy.remove_groups(made)

    return harness.memo(_pg, (tenant_groups, group_options), run)


def _enforced(m: dict, how: str) -> None:
    leaks = [(t, m["peaks"][t], q) for t, q in QUOTAS.items() if m["peaks"][t] > q]
    if leaks:
        t, peak, q = max(leaks, key=lambda x: x[1] - x[2])
        raise AssertionError(
            f"quota leak: tenant {t} held {peak} GPUs at once under a flood (its quota is {q})"
            + "".join(f"; tenant {tt} held {p} (quota {qq})" for tt, p, qq in leaks if tt != t)
            + f" -- its kernels are not limited by {how}")


def _isolated(m: dict) -> None:
    worst = min(m["isolation"], key=m["isolation"].get)
    if m["isolation"][worst] < T.isolation_min:
        raise AssertionError(
            f"isolation: while tenant {T.noisy} flooded, tenant {worst} kept {m['isolation'][worst]:.2f}x "
            f"its solo throughput (median of {T.rounds} interleaved rounds); needed ≥ {T.isolation_min:.2f}x")


def _overhead(m: dict, tier: float, how: str) -> None:
    if m["overhead"] < tier:
        a, b = m["totals"][0]
        raise AssertionError(
            f"overhead: with {how} the saturated pool ran {m['overhead']:.2f}x the kernels/s of no quotas "
            f"(e.g. {a:.1f} vs {b:.1f}/s, interleaved); this tier needs ≥ {tier:.2f}x")


@register(LAB, "resources-enforced", 2)
def resources_enforced(quota_resources, resource_options):
    """Custom resources: no tenant ever holds more GPUs than its quota, each flooding alone and together."""
    _enforced(measure_resources(quota_resources, resource_options), "its tenant resource")


@register(LAB, "resources-isolation", 2)
def resources_isolation(quota_resources, resource_options):
    """Custom resources: the quiet tenants keep their throughput while the noisy one floods."""
    _isolated(measure_resources(quota_resources, resource_options))


@register(LAB, "resources-overhead-tier1", 1)
def resources_overhead_tier1(quota_resources, resource_options):
    _overhead(measure_resources(quota_resources, resource_options), T.overhead_tiers[0], "custom-resource quotas")


@register(LAB, "resources-overhead-tier2", 1)
def resources_overhead_tier2(quota_resources, resource_options):
    _overhead(measure_resources(quota_resources, resource_options), T.overhead_tiers[1], "custom-resource quotas")


@register(LAB, "groups-enforced", 2)
def groups_enforced(tenant_groups, group_options):
    """Placement groups: no tenant ever holds more GPUs than its quota."""
    _enforced(measure_groups(tenant_groups, group_options), "its placement group")


@register(LAB, "groups-overhead-tier1", 1)
def groups_overhead_tier1(tenant_groups, group_options):
    _overhead(measure_groups(tenant_groups, group_options), T.groups_overhead_tiers[0], "placement-group quotas")


@register(LAB, "groups-overhead-tier2", 1)
def groups_overhead_tier2(tenant_groups, group_options):
    _overhead(measure_groups(tenant_groups, group_options), T.groups_overhead_tiers[1], "placement-group quotas")


# ---------------------------------------------------------------- manifests

def _manifests(tenant_manifests) -> list:
    """The learner's manifests for the course quotas and for a seeded other split, validated."""

    def run():
        out = []
        for quotas in (dict(QUOTAS), _alt_quotas()):
            objs = harness.call(tenant_manifests, dict(quotas), what=f"tenant_manifests({quotas})",
                                timeout_s=T.call_timeout_s)
            if not isinstance(objs, (list, tuple)) or not objs:
                raise AssertionError(f"tenant_manifests({quotas}) returned {type(objs).__name__}; "
                                     "expected a non-empty list of manifests (dicts)")
            out.append((quotas, list(objs)))
        return out

    return harness.memo(_mf, tenant_manifests, run)


@register(LAB, "manifests-valid", 2)
def manifests_valid(tenant_manifests):
    """Every manifest passes the Kubernetes schemas (strict) or the KubeRay/Kueue field checks."""
    for quotas, objs in _manifests(tenant_manifests):
        try:
            k8s.validate_all(objs)
        except k8s.ManifestError as exc:
            raise AssertionError(f"for quotas {quotas}: {exc}") from None


@register(LAB, "manifests-quotas", 1)
def manifests_quotas(tenant_manifests):
    """One ResourceQuota per tenant namespace with requests.nvidia.com/gpu = its quota; they sum to the pool."""
    for quotas, objs in _manifests(tenant_manifests):
        got = k8s.gpu_quota(objs)
        for t, q in quotas.items():
            if got.get(f"tenant-{t}") != q:
                raise AssertionError(f"for quotas {quotas}: namespace tenant-{t} has requests.{k8s.GPU} "
                                     f"{got.get(f'tenant-{t}')} in its ResourceQuota; expected {q}")
        total = sum(got.get(f"tenant-{t}", 0) for t in quotas)
        if total != T.pool:
            raise AssertionError(f"for quotas {quotas}: the tenants' GPU quotas sum to {total}, not the pool of {T.pool}")


@register(LAB, "manifests-gpu-limits", 1)
def manifests_gpu_limits(tenant_manifests):
    """GPU workers set whole-number nvidia.com/gpu limits; each namespace caps GPUs per container."""
    for quotas, objs in _manifests(tenant_manifests):
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


@register(LAB, "manifests-fit", 1)
def manifests_fit(tenant_manifests):
    """Each tenant's RayCluster fits its quota and is queued in a Kueue LocalQueue whose ClusterQueue has that quota."""
    for quotas, objs in _manifests(tenant_manifests):
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


def calibrate() -> list[str]:
    """The reference's isolation and overhead on this machine, for both mechanisms."""
    from ..reference import lab03 as ref

    cr = measure_resources(ref.quota_resources, ref.resource_options)
    pg = measure_groups(ref.tenant_groups, ref.group_options)
    return [f"custom resources: peaks {cr['peaks']}, isolation {cr['isolation']}, overhead {cr['overhead']:.2f}",
            f"placement groups: peaks {pg['peaks']}, isolation {pg['isolation']}, overhead {pg['overhead']:.2f}",
            f"tiers: isolation ≥ {T.isolation_min}, overhead {T.overhead_tiers}, groups {T.groups_overhead_tiers}"]
