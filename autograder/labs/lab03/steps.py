"""03_quotas' kit steps (:mod:`autograder.routines`): the learner's placement-group policy read
as plain data on the kernel's side; a policy's measurement under the grader's load generator
on the reference process's side. Imported by both; they decide nothing (the checks do)."""

from __future__ import annotations

import statistics

from course import tenancy

from ...routines import step
from .targets import TARGETS as T

POOL = "autograder_pool"  # the grader's own resource: the pool's size, whatever else the Ray has
QUOTAS = dict(T.quotas)


@step
def group_policy(tenant_groups, group_options, quotas: dict) -> dict:
    """Kernel side: the learner's placement groups and options, as plain data.

    Makes the groups on this kernel's Ray (restarted with room for them only when fewer than
    the pool's GPUs are free: a restart costs seconds per submission), reads each one's bundles and strategy from Ray's
    placement-group table, turns each tenant's ``PlacementGroupSchedulingStrategy`` into the
    tenant whose group it names and the bundle index, and removes the groups again.
    """
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    pool = sum(quotas.values())
    if not (ray.is_initialized() and ray.available_resources().get("GPU", 0) >= pool):  # else: no restart
        tenancy.start(tenancy.tenant_resources(None) if ray.is_initialized() else None, pool=pool, spare=pool,
                      warm=False)
    groups = tenant_groups(dict(quotas))
    try:
        if not isinstance(groups, dict) or set(groups) != set(quotas):
            raise AssertionError(f"tenant_groups returned {type(groups).__name__} "
                                 f"{sorted(groups) if isinstance(groups, dict) else ''}; expected one "
                                 f"placement group per tenant {sorted(quotas)}")
        ready, _ = ray.wait([g.ready() for g in groups.values()], num_returns=len(groups), timeout=T.pg_ready_timeout_s)
        if len(ready) < len(groups):
            raise AssertionError(f"tenant_groups' placement groups were not all ready within {T.pg_ready_timeout_s:g} s: "
                                 f"do they ask for more than the pool of {pool} GPUs?")
        whose = {g.id.hex(): t for t, g in groups.items()}
        table = {t: ray.util.placement_group_table(g) for t, g in groups.items()}
        out = {"groups": {t: {"bundles": [dict(b) for _, b in sorted(info["bundles"].items())],
                              "strategy": info["strategy"]} for t, info in table.items()},
               "options": {}}
        for t in quotas:
            opts = dict(group_options(t, groups) or {})
            strategy = opts.pop("scheduling_strategy", None)
            if isinstance(strategy, PlacementGroupSchedulingStrategy):
                opts["group"] = {"tenant": whose.get(strategy.placement_group.id.hex()),
                                 "bundle_index": strategy.placement_group_bundle_index}
            elif strategy is not None:
                raise AssertionError(f"group_options({t!r}, groups) set scheduling_strategy to "
                                     f"{type(strategy).__name__}, not a PlacementGroupSchedulingStrategy")
            out["options"][t] = opts
        return out
    finally:
        tenancy.remove_groups(groups if isinstance(groups, dict) else [])


# ---------------------------------------------------------------- the grader's measurement

def _start(resources: dict | None) -> None:
    """The reference process's Ray for both policies: twice the pool's GPUs, the custom-resource
    policy's ``resources`` (None: those it has), and :data:`POOL` -- one unit per GPU of the
    pool, which every kernel but a placement group's takes, so that neither the custom-resource
    policy nor the no-quota reference ever runs more than the pool. Placement groups reserve
    one half of the GPUs and the no-quota reference runs on the other, so no group is removed
    mid-measurement (a task can be stranded on a removed group); one Ray start serves both.

    A worker process per GPU, started before measuring: with only the pool's worth, the
    no-quota reference next to placement groups started its workers during the overhead
    rounds and measured 13-60 kernels/s against the groups' 67 (overhead "1.5x").
    """
    import ray

    if resources is None:
        resources = tenancy.tenant_resources(None) if ray.is_initialized() else {}
    try:
        tenancy.start({**resources, POOL: T.pool}, pool=2 * T.pool)
    except Exception as exc:  # noqa: BLE001 -- a bad resource dict can make ray.init fail
        raise AssertionError(f"Ray would not start with quota_resources' {resources!r}: {exc}") from None


def _pooled(opts: dict) -> dict:
    """A kernel's options plus one unit of the grader's :data:`POOL`."""
    return {**opts, "resources": {**(opts.get("resources") or {}), POOL: 1}}


@step
def measure_policy(policy: dict) -> dict:
    """Reference-process side: a policy's enforcement, isolation and overhead (see :func:`_start`)."""
    import ray
    from ray.util import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    groups = {}
    _start(policy.get("resources"))
    if "groups" in policy:
        groups = {t: placement_group(g["bundles"], strategy=g["strategy"]) for t, g in policy["groups"].items()}
        ready, _ = ray.wait([g.ready() for g in groups.values()], num_returns=len(groups), timeout=T.pg_ready_timeout_s)
        if len(ready) < len(groups):
            tenancy.remove_groups(groups)
            raise AssertionError(f"the placement groups were not all ready within {T.pg_ready_timeout_s:g} s: "
                                 f"do they ask for more than the pool of {T.pool} GPUs?")

    def options(t):
        o = dict(policy["options"][t])
        group = o.pop("group", None)
        if group is None:
            return _pooled(o)
        o["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
            groups[group["tenant"]], placement_group_bundle_index=group["bundle_index"])
        return o

    try:
        go, none = _runner(options), _runner(lambda t: _pooled({}))
        if groups:  # new groups start cold, and the no-quota reference then needs workers of its own
            go(tenancy.saturate(QUOTAS), 0.5)
            none(tenancy.saturate(QUOTAS), T.phase_s)
        return _measure(go, none)  # the isolation rounds also warm the placement groups before the overhead rounds
    finally:
        tenancy.remove_groups(groups)


def _runner(options):
    def go(demand, seconds):
        try:
            return tenancy.run(options, demand, seconds=seconds, drain_timeout_s=T.drain_timeout_s)
        except (TypeError, ValueError, TimeoutError) as exc:
            raise AssertionError(f"running the tenants' kernels failed: {exc}") from None
    return go


def _measure(go, none) -> dict:
    """Enforcement bursts, isolation rounds and overhead rounds with one policy ``go``.

    The no-quota reference saturates the pool's worth of GPUs that no placement group holds.
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
            "isolation": {t: statistics.median(v) for t, v in iso.items() if v},
            "flood": flood_summary, "overhead": statistics.median(ratios), "totals": [list(x) for x in totals]}
