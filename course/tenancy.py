"""Several tenants sharing one pool of (logical) GPUs on Ray, measured by the harness itself.

The setting of lab 03: ``POOL`` logical GPUs, tenants ``a``, ``b``, ``c`` with quotas
``QUOTAS`` (8 / 4 / 4 of 16), and one GPU "kernel" per task. The kernel is **emulated**: a
sleep of fixed duration inside a task that holds one logical GPU (``num_gpus=1,
num_cpus=0``), so the lesson is about *scheduling*, identical on a laptop and on a GPU node.

Every kernel task is this module's own :func:`gpu_kernel`; it stamps when it started and
finished on the worker, so per-tenant concurrent GPU use (:meth:`Run.peak`) comes from the
harness, never from anyone's counters. A quota policy is just the *extra* Ray options a
tenant's tasks get (``resources=`` a per-tenant custom resource, or a
``scheduling_strategy=`` into the tenant's placement group); the harness always adds
``num_gpus=1, num_cpus=0`` itself.

:func:`run` drives a closed loop: each tenant keeps ``demand[tenant]`` kernels in flight for
``seconds``, resubmitting as each one finishes (a noisy neighbour keeps many more in flight
than its quota). Throughput counts kernels finished inside the window; latency is from
submission to the driver seeing the result.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

import ray

from . import cluster

POOL = 16                                # logical GPUs in the shared pool
QUOTAS = {"a": 8, "b": 4, "c": 4}        # each tenant's share; they sum to the pool
NOISY = "a"                              # the tenant that floods
KERNEL_S = 0.2                           # the emulated kernel's duration (seconds)
BURST_KERNEL_S = 0.25                    # the emulated kernel of :func:`replay` (uneven demand)
ALLOWED_OPTIONS = ("resources", "scheduling_strategy")


@ray.remote(num_gpus=1, num_cpus=0, max_calls=0)
def gpu_kernel(tenant: str, seconds: float):
    """One emulated GPU kernel: hold a logical GPU for ``seconds``; return (tenant, start, end).

    ``max_calls=0``: Ray otherwise starts a fresh worker process for every GPU task.
    """
    start = time.time()
    time.sleep(seconds)
    return tenant, start, time.time()


def tenant_resources(resources: dict | None) -> dict:
    """The custom resources of a running Ray (or of ``resources``) that are not CPU/GPU/memory."""
    have = ray.cluster_resources() if resources is None else resources
    return {k: float(v) for k, v in have.items()
            if k not in ("CPU", "GPU", "memory", "object_store_memory") and not k.startswith("node:")
            and not k.startswith("accelerator_type")}


def start(resources: dict | None = None, *, pool: int = POOL, spare: int = 0,
          warm: bool = True) -> cluster.ClusterInfo:
    """Ray with ``pool + spare`` logical GPUs and exactly the custom ``resources`` given.

    Restarts the local Ray when its custom resources or GPU count differ (a quota is a node's
    resource, fixed when Ray starts). ``num_cpus=pool`` keeps a worker process per GPU of the
    pool alive between runs (Ray keeps about as many idle workers as CPUs). ``warm`` starts
    those workers now. ``spare`` GPUs are for a no-quota reference that runs while placement
    groups hold the pool: removing and re-making groups between runs can strand a task.
    """
    want = {k: float(v) for k, v in (resources or {}).items()}
    if ray.is_initialized() and "RAY_ADDRESS" not in os.environ:
        have = ray.cluster_resources()
        if tenant_resources(have) != want or have.get("GPU", 0) != pool + spare:
            cluster.stop()
    info = cluster.start(num_cpus=pool, num_gpus=pool + spare, resources=want or None)
    if warm:
        warm_up(pool)
    return info


def warm_up(pool: int = POOL, timeout_s: float = 120.0) -> int:
    """Start ``pool`` worker processes by running ``pool`` kernels at once; return the peak seen."""
    deadline = time.monotonic() + timeout_s
    peak = 0
    while peak < pool and time.monotonic() < deadline:
        out = ray.get([gpu_kernel.remote("warm", 0.5) for _ in range(pool)])
        peak = _peak([(s, e) for _, s, e in out])
    return peak


def _peak(intervals) -> int:
    """Most intervals overlapping at any instant (an end at t comes before a start at t)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals],
                    key=lambda x: (x[0], x[1]))
    now = best = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


@dataclass
class Run:
    """What the harness saw during one :func:`run`."""

    seconds: float
    demand: dict
    records: list = field(default_factory=list)  # (tenant, gpu_start, gpu_end, latency_s, in_window)
    wall0: float | None = None  # the window's start, wall-clock (time.time), as the kernels stamp theirs

    def tenants(self) -> list[str]:
        return sorted(self.demand)

    def peak(self, tenant: str | None = None) -> int:
        """Most GPUs the tenant (or everyone, for None) held at once, from the kernels' stamps."""
        return _peak([(s, e) for t, s, e, _, _ in self.records if tenant is None or t == tenant])

    def done(self, tenant: str) -> int:
        """Kernels of ``tenant`` that finished inside the measuring window."""
        return sum(1 for t, *_, inside in self.records if t == tenant and inside)

    def throughput(self, tenant: str | None = None) -> float:
        """Kernels per second finished inside the window (all tenants for None)."""
        names = self.tenants() if tenant is None else [tenant]
        return sum(self.done(t) for t in names) / self.seconds

    def relative_to(self, other: "Run", tenant: str | None = None) -> float:
        """This run's throughput over ``other``'s (for ``tenant``, or all tenants); NaN when
        ``other`` finished no kernel inside its window (a machine too busy to measure)."""
        base = other.throughput(tenant)
        return self.throughput(tenant) / base if base else float("nan")

    def busy(self, pool: int = POOL) -> float:
        """The share of the pool's GPU-time inside the window that kernels held, from the kernels' own
        stamps: no whole waves, so it resolves finer than :meth:`throughput`. NaN without a start stamp."""
        if self.wall0 is None or self.seconds <= 0:
            return float("nan")
        lo, hi = self.wall0, self.wall0 + self.seconds
        held = sum(max(0.0, min(e, hi) - max(s, lo)) for _, s, e, _, _ in self.records)
        return held / (pool * self.seconds)

    def latency(self, tenant: str, q: float = 50) -> float:
        """The ``q``-th percentile of submit-to-result seconds of ``tenant``'s kernels."""
        return _pct([lat for t, _, _, lat, inside in self.records if t == tenant and inside], q)

    def summary(self) -> dict:
        """Per tenant: demand, peak GPUs, kernels/s, p50 and p95 latency (ms)."""
        return {t: {"demand": self.demand[t], "peak_gpus": self.peak(t),
                    "kernels_per_s": round(self.throughput(t), 2),
                    "p50_ms": round(self.latency(t, 50) * 1e3, 1),
                    "p95_ms": round(self.latency(t, 95) * 1e3, 1)} for t in self.tenants()}


def check_options(opts, tenant: str) -> dict:
    """The extra Ray options of a policy for ``tenant``, checked: only the allowed keys."""
    if opts is None:
        return {}
    if not isinstance(opts, dict):
        raise TypeError(f"options for tenant {tenant!r} must be a dict, not {type(opts).__name__}")
    extra = sorted(set(opts) - set(ALLOWED_OPTIONS))
    if extra:
        raise ValueError(f"options for tenant {tenant!r} may only set {', '.join(ALLOWED_OPTIONS)}; "
                         f"got {', '.join(extra)} (the harness sets num_gpus=1, num_cpus=0 itself)")
    res = opts.get("resources") or {}
    if any(k in ("CPU", "GPU", "memory") for k in res):
        raise ValueError(f"options for tenant {tenant!r}: resources= is for custom resources; "
                         "CPU/GPU are set by the harness")
    return dict(opts)


def run(options: dict | Callable[[str], dict] | None, demand: dict, *, seconds: float = 2.0,
        kernel_s: float = KERNEL_S, clock=time.perf_counter, drain_timeout_s: float = 60.0) -> Run:
    """Keep ``demand[tenant]`` kernels in flight per tenant for ``seconds``; record everything.

    ``options`` gives each tenant's extra Ray options: a dict ``{tenant: {...}}``, a function
    ``tenant -> {...}``, or None for no quotas at all. Kernels still running at the end are
    waited for (their GPU use counts towards :meth:`Run.peak`, not towards throughput).
    """
    tenants = sorted(t for t, n in demand.items() if n > 0)
    if options is None:
        opts = {t: {} for t in tenants}
    elif callable(options):
        opts = {t: check_options(options(t), t) for t in tenants}
    else:
        opts = {t: check_options(options.get(t), t) for t in tenants}
    remotes = {t: gpu_kernel.options(**opts[t]) for t in tenants}
    pending: dict = {}  # ref -> (tenant, submitted)

    def submit(t):
        pending[remotes[t].remote(t, kernel_s)] = (t, clock())

    result = Run(seconds, {t: demand[t] for t in tenants})
    t0 = clock()
    result.wall0 = time.time()
    end = t0 + seconds
    for t in tenants:
        for _ in range(demand[t]):
            submit(t)
    stop_by = end + drain_timeout_s
    while pending:
        now = clock()
        if now > stop_by:
            raise TimeoutError(f"{len(pending)} kernels still pending {drain_timeout_s:g} s after the run: "
                               "a tenant's tasks cannot be scheduled (is its quota resource or placement "
                               "group there?)")
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=min(1.0, max(0.01, stop_by - now)))
        if not ready:
            continue
        more, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
        seen = clock()
        for ref in set(ready) | set(more):
            t, submitted = pending.pop(ref)
            tenant, gs, ge = ray.get(ref)
            result.records.append((t, gs, ge, seen - submitted, seen <= end))
            if seen < end:
                submit(t)
    return result


def flood(quotas: dict = QUOTAS, noisy: str = NOISY, factor: int = 4) -> dict:
    """Demand under a flood: quiet tenants keep their quota busy, the noisy one ``factor``× its quota."""
    return {t: (q * factor if t == noisy else q) for t, q in quotas.items()}


def quiet(quotas: dict = QUOTAS, noisy: str = NOISY) -> dict:
    """Demand of the quiet tenants alone (their solo throughput)."""
    return {t: q for t, q in quotas.items() if t != noisy}


def saturate(quotas: dict = QUOTAS, factor: int = 2) -> dict:
    """Everyone wants ``factor``× their quota: the pool stays busy with or without quotas."""
    return {t: q * factor for t, q in quotas.items()}


# ---------------------------------------------------------------- per-task scheduling against kernel length
#
# Ray enforces a custom-resource quota per *task*: every kernel is scheduled on its own, and the
# time between one kernel's end and the next one's start on that GPU is GPU-time no kernel used.
# It is paid per kernel, so what it costs depends on how long a kernel is. A ResourceQuota is
# checked once, when a pod is admitted; the kernels inside the pod are not scheduled at all.

SWEEP_KERNELS_S = (0.002, 0.01, 0.05, KERNEL_S)  # the emulated kernel lengths of :func:`sweep` (sleeps)


def sweep(options, demand: dict | None = None, *, kernels_s=SWEEP_KERNELS_S, seconds: float = 1.0,
          rounds: int = 2, per_window: int = 10, pool: int = POOL) -> dict:
    """Saturated runs (``demand``, default :func:`saturate`) with the quota ``options`` and without
    any, at each emulated kernel length in ``kernels_s``, interleaved (with, without; then without,
    with). Returns ``{kernel_s: {"quotas": loss, "none": loss, "spread": s}}``: ``loss`` is the share
    of the pool's GPU-time in the window that no kernel held (1 - :meth:`Run.busy`), of the better
    round, as a timing takes its fastest repeat: a round another process disturbed loses more,
    never less; ``spread`` is how far each policy's rounds differ from each other (|difference| / mean
    of their busy shares), summed over the two policies, as a ratio of the two carries both: a
    quota's own cost smaller than that is not told apart from noise. Windows are ``seconds`` or
    ``per_window`` kernels, whichever is longer."""
    demand = saturate() if demand is None else demand
    out = {}
    for k in kernels_s:
        window = max(seconds, per_window * k)
        busy = {"quotas": [], "none": []}
        for i in range(rounds):
            for how in (("quotas", "none") if i % 2 == 0 else ("none", "quotas")):
                r = run(options if how == "quotas" else None, demand, seconds=window, kernel_s=k)
                busy[how].append(r.busy(pool))
        mean = {how: statistics.fmean(b) for how, b in busy.items()}
        spread = sum((max(b) - min(b)) / mean[how] if mean[how] > 0 else float("nan") for how, b in busy.items())
        out[k] = {"quotas": 1 - max(busy["quotas"]), "none": 1 - max(busy["none"]), "spread": spread}
    return out


def remove_groups(groups) -> None:
    """Remove placement groups (a dict's values or any iterable), ignoring ones already gone."""
    from ray.util import remove_placement_group

    items = groups.values() if isinstance(groups, dict) else (groups or [])
    for pg in items:
        try:
            remove_placement_group(pg)
        except Exception:  # noqa: BLE001 -- already removed, or not a placement group
            pass


# ---------------------------------------------------------------- uneven demand: what fixed quotas cost
#
# Kueue's model of sharing (its docs, *Cluster Queue*: "cohort", "borrowingLimit"): each tenant's
# ClusterQueue has a nominal quota; queues in one cohort lend the quota they do not use, and a
# tenant below its nominal quota gets the next free GPU before any borrower (reclaimed on
# release; Kueue can also preempt borrowed workloads). Ray has no such admission: :func:`replay`
# emulates it in the driver -- a kernel is submitted to Ray only once admitted -- so the three
# policies below differ only in their limits, on the same Ray, with the same kernels.

def bursty(quotas: dict = QUOTAS) -> list[tuple[float, str, int]]:
    """Uneven demand, times in kernels: ``(arrival, tenant, kernels)``, one burst per tenant.

    The largest tenant bursts 4 × its quota at once; the next arrives one kernel later with 3 ×
    its quota, the last two kernels later with 2 × its quota. With fixed quotas all three finish
    after 4 kernels, and until the others arrive their GPUs sit idle while the first one's
    kernels wait.
    """
    order = sorted(quotas, key=lambda t: (-quotas[t], t))
    plan = [(0.0, 4), (1.0, 3), (2.0, 2)]
    return [(at, t, quotas[t] * n) for t, (at, n) in zip(order, plan)]


def fixed(quotas: dict = QUOTAS) -> dict:
    """Fixed quotas: each tenant holds at most its quota, lends nothing (custom resources, groups)."""
    return {t: {"nominal": q, "borrowing_limit": 0} for t, q in quotas.items()}


def shared(quotas: dict = QUOTAS, pool: int = POOL) -> dict:
    """One shared pool, first come first served: no tenant has a guaranteed share."""
    return {t: {"nominal": 0, "borrowing_limit": pool} for t in quotas}


def cohort(quotas: dict = QUOTAS, borrowing_limit: int | None = None) -> dict:
    """Kueue's cohort: nominal quotas, unused quota lent (up to ``borrowing_limit``, None: any)."""
    return {t: {"nominal": q, "borrowing_limit": borrowing_limit} for t, q in quotas.items()}


@dataclass
class Replay:
    """What :func:`replay` saw: per kernel ``(tenant, arrived, admitted, started, ended)``, wall-clock
    seconds (arrival and admission stamped by the driver, start and end by the kernel itself)."""

    pool: int
    kernel_s: float
    records: list = field(default_factory=list)

    def _span(self):
        return min(r[1] for r in self.records), max(r[-1] for r in self.records)

    def makespan(self) -> float:
        """Seconds from the first arrival to the last kernel's end."""
        lo, hi = self._span()
        return hi - lo

    def idle_while_waiting(self) -> float:
        """GPU-seconds a GPU sat idle while a kernel that had arrived waited for admission: the
        integral over time of min(idle GPUs, kernels not yet admitted), idle GPUs counted from the
        kernels' own stamps. Ray's start-up of an admitted kernel is not counted: it is the same
        for every policy, and this is the policy's cost."""
        events = sorted({x for _, a, m, s, e in self.records for x in (a, m, s, e)})
        lost = 0.0
        for lo, hi in zip(events, events[1:]):
            mid = (lo + hi) / 2
            running = sum(1 for _, _, _, s, e in self.records if s <= mid < e)
            waiting = sum(1 for _, a, m, _, _ in self.records if a <= mid < m)
            lost += min(max(self.pool - running, 0), waiting) * (hi - lo)
        return lost

    def idle_fraction(self) -> float:
        """:meth:`idle_while_waiting` over the pool's GPU-seconds of the run (pool × makespan)."""
        span = self.makespan()
        return self.idle_while_waiting() / (self.pool * span) if span > 0 else float("nan")

    def wait(self, tenant: str) -> float:
        """Mean seconds ``tenant``'s kernels waited from arrival to start."""
        w = [s - a for t, a, _, s, _ in self.records if t == tenant]
        return sum(w) / len(w) if w else float("nan")

    def peak(self, tenant: str) -> int:
        return _peak([(s, e) for t, _, _, s, e in self.records if t == tenant])


def replay(limits: dict, schedule: list, *, pool: int = POOL, kernel_s: float = BURST_KERNEL_S,
           options: dict | None = None, drain_timeout_s: float = 60.0) -> Replay:
    """Run ``schedule`` (from :func:`bursty`; arrivals in kernels) under Kueue-like admission.

    ``limits``: ``{tenant: {"nominal": n, "borrowing_limit": b}}`` (b None: no limit). A free GPU
    goes first to the earliest waiting kernel of a tenant holding fewer than its nominal quota,
    else to the earliest waiting kernel of a tenant below nominal + borrowing limit. Admitted
    kernels are :func:`gpu_kernel` tasks (``options``: extra Ray options for each, e.g. a pool
    resource). Arrivals and starts are wall-clock stamps (``time.time``), as the kernels' own.
    """
    cap = {t: l["nominal"] + (pool if l.get("borrowing_limit") is None else l["borrowing_limit"])
           for t, l in limits.items()}
    remote = gpu_kernel.options(**(options or {}))
    t0 = time.time() + 0.01
    arrivals = sorted((t0 + at * kernel_s, t, i) for at, t, n in schedule for i in range(n))
    queue: list = []          # (arrived, tenant), waiting for admission
    held = {t: 0 for t in limits}
    running: dict = {}        # ref -> (tenant, arrived)
    out = Replay(pool, kernel_s)
    stop_by = t0 + drain_timeout_s
    while arrivals or queue or running:
        now = time.time()
        if now > stop_by:
            raise TimeoutError(f"{len(queue) + len(running)} kernels unfinished {drain_timeout_s:g} s after the start")
        while arrivals and arrivals[0][0] <= now:
            a, t, _ = arrivals.pop(0)
            queue.append((a, t))
        while queue and sum(held.values()) < pool:
            below = [x for x in queue if held[x[1]] < limits[x[1]]["nominal"]]
            pick = below or [x for x in queue if held[x[1]] < cap[x[1]]]
            if not pick:
                break
            a, t = min(pick)
            queue.remove((a, t))
            held[t] += 1
            running[remote.remote(t, kernel_s)] = (t, a, time.time())
        wait_s = max(0.001, min(0.05, arrivals[0][0] - time.time())) if arrivals else 0.05
        if not running:
            time.sleep(wait_s)
            continue
        done, _ = ray.wait(list(running), num_returns=1, timeout=wait_s)
        if done:
            done, _ = ray.wait(list(running), num_returns=len(running), timeout=0)
        for ref in done:
            t, a, m = running.pop(ref)
            _, s, e = ray.get(ref)
            held[t] -= 1
            out.records.append((t, a, m, s, e))
    return out


# ---------------------------------------------------------------- gang scheduling: all or nothing

@ray.remote(num_cpus=0)
class Member:
    """One worker of a job that needs several GPUs at once (the harness adds ``num_gpus=1``)."""

    def ready(self) -> bool:
        return True


def _block(free: int, timeout_s: float = 60.0):
    """A placement group holding every GPU of the cluster but ``free``: the pool the jobs compete
    for. Sized from the cluster's total (``ray.available_resources`` lags behind work just done)
    and ready only once that many GPUs are actually free."""
    from ray.util import placement_group

    extra = int(ray.cluster_resources().get("GPU", 0)) - free
    if extra < 0:
        raise ValueError(f"the cluster has only {extra + free} GPUs; {free} wanted")
    if extra == 0:
        return None
    pg = placement_group([{"GPU": 1}] * extra)
    ray.get(pg.ready(), timeout=timeout_s)
    return pg


def piecemeal(*, jobs: int = 2, k: int = 4, free: int = 6, timeout_s: float = 3.0) -> dict:
    """``jobs`` jobs of ``k`` one-GPU actors each, created one at a time and interleaved, on
    ``free`` GPUs (fewer than jobs × k). After ``timeout_s``: how many of each job's actors were
    up (each holding its GPU: Ray started it), the GPUs they held, and which jobs had all ``k``
    (could start). The actors are killed afterwards."""
    blocker = _block(free)
    members = {j: [] for j in range(jobs)}
    try:
        for _ in range(k):
            for j in range(jobs):
                members[j].append(Member.options(num_gpus=1).remote())
        refs = {m.ready.remote(): j for j, ms in members.items() for m in ms}
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
        up = {j: sum(1 for r in ready if refs[r] == j) for j in members}
        return {"held_gpus": sum(up.values()), "up": up, "started": [j for j, n in up.items() if n == k], "k": k,
                "free": free, "waited_s": timeout_s}
    finally:
        for ms in members.values():
            for m in ms:
                ray.kill(m)
        remove_groups([blocker] if blocker else [])


def gang(make_group, *, jobs: int = 2, k: int = 4, free: int = 6, work_s: float = 0.3,
         timeout_s: float = 10.0, poll_s: float = 0.01) -> dict:
    """``jobs`` jobs of ``k`` GPUs each as placement groups from ``make_group(k)``, all submitted
    at once on ``free`` GPUs. Read from Ray's placement-group table every ``poll_s``: when each
    group was CREATED (its job then "runs", a sleep of ``work_s``, emulated, and releases it),
    and the most bundles a group not yet CREATED held on a node while it held fewer than ``k``
    (a partial hold; Ray prepares all of a group's bundles before it commits them)."""
    blocker = _block(free)
    t0 = time.perf_counter()
    groups = [make_group(k) for _ in range(jobs)]
    created: dict = {}
    partial = 0
    states: dict = {}
    try:
        while len(created) < jobs and time.perf_counter() - t0 < timeout_s:
            now = time.perf_counter() - t0
            for j, g in enumerate(groups):
                if j in created:
                    if created[j] + work_s <= now and states.get(j) != "REMOVED":
                        remove_groups([g])
                        states[j] = "REMOVED"
                    continue
                info = ray.util.placement_group_table(g)
                states[j] = info.get("state")
                placed = sum(1 for n in (info.get("bundles_to_node_id") or {}).values() if n)
                if info.get("state") == "CREATED":
                    created[j] = now
                elif placed < len(info.get("bundles") or {}):
                    partial = max(partial, placed)
            time.sleep(poll_s)
        order = sorted(created, key=created.get)
        return {"k": k, "free": free, "created_s": [round(created[j], 3) for j in order],
                "started": len(created), "partial_bundles": partial,
                "strategy": ray.util.placement_group_table(groups[0]).get("strategy") if groups else None}
    finally:
        remove_groups(groups + ([blocker] if blocker else []))
