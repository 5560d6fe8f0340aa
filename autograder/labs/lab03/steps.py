"""03_quotas' kit steps (:mod:`autograder.kernel.routines`): the learner's placement-group policy
read as plain data on the kernel's side; a policy's measurement under the grader's load generator
on the reference process's side. Imported by both; they decide nothing (the checks do)."""

from __future__ import annotations

import statistics

from course import tenancy

from ...kernel.routines import step
from .targets import TARGETS as T

POOL = "autograder_pool"  # the grader's own resource: the pool's size, whatever else the Ray has
REFERENCE_PREFIX = "autograder_reference_"  # the reference policy's resources, beside the learner's
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


def renamed(policy: dict) -> dict:
    """A custom-resource ``policy`` with every resource name prefixed by :data:`REFERENCE_PREFIX`,
    so that it runs on the same Ray as the learner's policy without sharing a counter."""
    rename = lambda res: {REFERENCE_PREFIX + k: v for k, v in (res or {}).items()}  # noqa: E731
    return {"resources": rename(policy["resources"]),
            "options": {t: {**o, "resources": rename(o.get("resources"))} for t, o in policy["options"].items()}}


@step
def measure_policy(policy: dict, reference: dict | None = None) -> dict:
    """Reference-process side: a policy's enforcement, isolation and overhead (see :func:`_start`).

    ``reference``: the reference's custom-resource policy, run beside the learner's on the same
    Ray (its resources renamed, :func:`renamed`) in the isolation rounds, interleaved, so that
    isolation is a ratio to what the reference keeps under the same load (:func:`_measure`).
    """
    import ray
    from ray.util import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    groups = {}
    reference = renamed(reference) if reference else None
    _start({**(policy.get("resources") or {}), **(reference["resources"] if reference else {})}
           if "resources" in policy else None)
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
        beside = _runner(lambda t: _pooled(reference["options"][t])) if reference else None
        if groups:  # new groups start cold, and the no-quota reference then needs workers of its own
            go(tenancy.saturate(QUOTAS), 0.5)
            none(tenancy.saturate(QUOTAS), T.phase_s)
        return _measure(go, none, beside)  # the isolation rounds also warm the placement groups before the overhead rounds
    finally:
        tenancy.remove_groups(groups)


def _runner(options):
    def go(demand, seconds):
        try:
            return tenancy.run(options, demand, seconds=seconds, drain_timeout_s=T.drain_timeout_s)
        except (TypeError, ValueError, TimeoutError) as exc:
            raise AssertionError(f"running the tenants' kernels failed: {exc}") from None
    return go


def _round(run, first: str) -> tuple[dict, object]:
    """One isolation round of a policy ``run`` (``first``: "solo" or "flood"): each quiet tenant's
    throughput under the flood over its throughput alone, and the flood's run."""
    got = {}
    for kind in (first, "flood" if first == "solo" else "solo"):
        demand = tenancy.quiet(QUOTAS, T.noisy) if kind == "solo" else tenancy.flood(QUOTAS, T.noisy, T.flood_factor)
        got[kind] = run(demand, T.phase_s)
    iso = {}
    for t in QUOTAS:
        if t != T.noisy:
            solo = got["solo"].throughput(t)
            iso[t] = got["flood"].throughput(t) / solo if solo else 0.0
    return iso, got["flood"]


def _measure(go, none, beside=None) -> dict:
    """Enforcement bursts, isolation rounds and overhead rounds with one policy ``go``.

    ``beside``, the reference's policy on the same Ray, runs each isolation round too, in
    alternating order; ``isolation_vs_reference`` is each quiet tenant's median over the rounds
    of the learner's isolation over the reference's (rounds where the reference finished
    nothing under the flood are left out). The no-quota reference saturates the pool's worth
    of GPUs that no placement group holds.
    """
    peaks = {t: 0 for t in QUOTAS}
    bursts = {}

    def note(r):
        for t in r.tenants():
            peaks[t] = max(peaks[t], r.peak(t))
        return r

    def noted(demand, seconds):
        return note(go(demand, seconds))

    note(go(tenancy.saturate(QUOTAS), 0.5))  # warm-up, discarded (its peaks still count)
    for t in QUOTAS:
        r = note(go({t: 2 * T.pool}, T.burst_s))
        bursts[t] = r.peak(t)
    quiet = [t for t in QUOTAS if t != T.noisy]
    iso = {t: [] for t in quiet}
    ref_iso = {t: [] for t in quiet}
    vs_ref = {t: [] for t in quiet}
    if beside is not None:
        beside(tenancy.saturate(QUOTAS), 0.5)  # its workers warm too
    for rnd in range(T.rounds):
        first = "solo" if rnd % 2 == 0 else "flood"
        sides = [("learner", noted), ("reference", beside)] if beside is not None else [("learner", noted)]
        got = {}
        for who, run in (sides if rnd % 2 == 0 else sides[::-1]):
            got[who] = _round(run, first)
        flood_summary = got["learner"][1].summary()
        for t in quiet:
            mine = got["learner"][0][t]
            iso[t].append(mine)
            if "reference" in got:
                theirs = got["reference"][0][t]
                ref_iso[t].append(theirs)
                if theirs > 0:
                    vs_ref[t].append(mine / theirs)
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
    out = {"peaks": peaks, "bursts": bursts,
           "isolation": {t: statistics.median(v) for t, v in iso.items() if v},
           "flood": flood_summary, "overhead": statistics.median(ratios), "totals": [list(x) for x in totals]}
    if beside is not None:
        out["reference_isolation"] = {t: statistics.median(v) for t, v in ref_iso.items() if v}
        out["isolation_vs_reference"] = {t: statistics.median(v) if v else 0.0 for t, v in vs_ref.items()}
    return out


@step
def measure_cohort(policy: dict, reference: dict) -> dict:
    """Reference-process side: bursty demand (:func:`course.tenancy.bursty`) replayed under fixed
    quotas, the learner's lending ``policy`` and the ``reference`` cohort, interleaved, on the
    grader's Ray (every kernel takes one unit of :data:`POOL`): each one's GPU-time idle while
    work waited for admission, as a fraction of the pool's GPU-time, and each tenant's mean wait."""
    _start(None)
    sides = {"fixed": tenancy.fixed(QUOTAS), "learner": policy, "reference": reference}
    got = {k: [] for k in sides}
    waits = {k: {} for k in sides}
    for rnd in range(T.cohort_rounds):
        for kind in (list(sides) if rnd % 2 == 0 else list(sides)[::-1]):
            try:
                r = tenancy.replay(sides[kind], tenancy.bursty(QUOTAS), pool=T.pool, options=_pooled({}),
                                   drain_timeout_s=T.drain_timeout_s)
            except TimeoutError as exc:
                raise AssertionError(f"replaying the bursty demand failed: {exc}") from None
            got[kind].append(r.idle_fraction())
            waits[kind] = {t: round(r.wait(t), 3) for t in QUOTAS}
    return {"idle": got, "waits": waits}


# ---------------------------------------------------------------- gang scheduling

@step
def gang_spec(gang_group, k: int) -> dict:
    """Kernel side: the learner's placement group for a job of ``k`` GPUs, as plain data: its
    bundles and strategy read from Ray's placement-group table; the group is removed again."""
    import ray
    from ray.util.placement_group import PlacementGroup

    if not (ray.is_initialized() and ray.available_resources().get("GPU", 0) >= k):  # else: no restart
        tenancy.start(tenancy.tenant_resources(None) if ray.is_initialized() else None, warm=False)
    group = gang_group(k)
    try:
        if not isinstance(group, PlacementGroup):
            raise AssertionError(f"gang_group({k}) returned {type(group).__name__}, not a placement group")
        ready, _ = ray.wait([group.ready()], timeout=T.pg_ready_timeout_s)
        if not ready:
            raise AssertionError(f"gang_group({k})'s placement group was not ready within {T.pg_ready_timeout_s:g} s")
        info = ray.util.placement_group_table(group)
        return {"bundles": [dict(b) for _, b in sorted(info["bundles"].items())], "strategy": info["strategy"]}
    finally:
        tenancy.remove_groups([group])


@step
def measure_gang(spec: dict, k: int) -> dict:
    """Reference-process side: two jobs of ``k`` GPUs, each a placement group made from ``spec``,
    submitted at once on ``2k - 2`` free GPUs of the grader's Ray (:func:`course.tenancy.gang`)."""
    from ray.util import placement_group

    _start(None)
    return tenancy.gang(lambda n: placement_group(spec["bundles"], strategy=spec["strategy"]), jobs=2, k=k,
                        free=2 * k - 2, work_s=T.gang_work_s, timeout_s=T.gang_timeout_s)
