""""What your numbers showed": each lab's closing bullets, computed from the learner's results.

One function per lab takes ``numbers`` -- ``{lab: {key: value}}`` as
:func:`course.results.load_all` returns it -- and returns three to five sentences, each built
from a saved measurement (never a fixed number). A missing number gives a bullet saying which
section to run, never an exception. :func:`markdown` renders them as a list for the notebook.
Like :mod:`course.verdicts`, this module imports no Ray and runs no kernel.
"""

from __future__ import annotations

from typing import Callable, Mapping

from .verdicts import (C1_LINEAR, C8_GPUS, C8_TARGET, _lab, _mib, _ms, _num, efficiency_noise, kernel_for_loss,
                       loss_at, loss_curve, workload_kernel_s)

CLAIMED_RESTART_S = 0.030   # C3's "~30 ms" (the claim, quoted in lab 02)
CLAIMED_OVERHEAD = 0.15     # C5's "~15 %"
C8_PER_GPU = C8_TARGET / C8_GPUS   # C8's images/s per GPU (10,000 / 200)


def _run(section: str) -> str:
    return f"not measured yet: run {section} and this cell again"


def lab00(numbers: Mapping) -> list[str]:
    d = _lab(numbers, "00_measure")
    out = []
    if d.get("backend"):
        out.append(f"Your kernels ran on **{d['backend']}** (`{d.get('fingerprint', '?')}`): every number "
                   "below belongs to that machine.")
    rates = d.get("kernel_images_per_s")
    if isinstance(rates, dict) and rates:
        by = {int(k): float(v) for k, v in rates.items() if isinstance(v, (int, float))}
        lo, hi = min(by), max(by, key=by.get)
        if hi == lo:
            out.append(f"Batching did not raise the rate here: {by[lo]:,.0f} images/s at {lo} image per "
                       "call was the best you measured.")
        else:
            out.append(f"Batching raised the rate {by[hi] / by[lo]:.1f}×: {by[hi]:,.0f} images/s at {hi} "
                       f"images per call vs {by[lo]:,.0f} at {lo}.")
    else:
        out.append("Batch sweep " + _run("section 5"))
    best = _num(d, "best_images_per_s")
    if best:
        out.append(f"At your best batch size one device did {best:,.0f} images/s; the C8 claim needs "
                   f"{C8_PER_GPU:g} per GPU, so this kernel alone would need {10_000 / best:.2g} of your "
                   "device for 10k images/s — before decoding, copying or the network.")
    else:
        out.append("C8 data point " + _run("section 7"))
    if d.get("best_batch") is not None:
        out.append(f"Your `best_batch_size` chose {d['best_batch']}.")
    return out


def lab01(numbers: Mapping) -> list[str]:
    d = _lab(numbers, "01_actor_scaling")
    out = []
    p50, p99 = _num(d, "call_p50_s"), _num(d, "call_p99_s")
    if p50 is not None and p99 is not None:
        out.append(f"One blocking actor call took {_ms(p50)} at the median and {_ms(p99)} at p99 on this "
                   "machine: one client, not a cluster's tail.")
    else:
        out.append("Per-call latency " + _run("section 2"))
    by = d.get("actor_images_per_s_by_batch")
    if isinstance(by, dict) and by:
        rates = {int(k): float(v) for k, v in by.items() if isinstance(v, (int, float))}
        lo, hi = min(rates), max(rates, key=rates.get)
        if hi == lo:
            out.append(f"Bigger calls did not raise the rate here: calls of {lo} image(s) gave the most, "
                       f"{rates[lo]:,.0f} images/s, so the fixed cost of a call did not dominate.")
        else:
            out.append(f"Calls of {hi} images gave {rates[hi] / rates[lo]:.1f}× the images/s of calls of {lo}: "
                       "the fixed cost of a call is paid once per call.")
    over = _num(d, "call_overhead_s")
    if over:
        out.append(f"Your fitted overhead, {_ms(over)} per call, caps one driver at about {1 / over:,.0f} "
                   "calls/s, whatever the number of GPUs.")
    n, es, el = _num(d, "fleet_size"), _num(d, "efficiency_short"), _num(d, "efficiency_long")
    ts, tl = _num(d, "short_kernel_s"), _num(d, "long_kernel_s")
    if None not in (n, es, el, ts, tl):
        s = (f"On {n:.0f} emulated GPUs, efficiency was {es:.2f} with {_ms(ts)} kernels and {el:.2f} "
             f"with {_ms(tl)} kernels: ")
        noise = efficiency_noise(d)
        if min(es, el) >= C1_LINEAR:
            s += f"both stayed near-linear (≥ {C1_LINEAR}), so this fleet did not reach the knee."
        elif noise is None:
            s += (f"the longer kernels' efficiency differed by {el - es:+.2f}, but this run saved no spread of its "
                  "repeats to tell that from noise: run section 4 again.")
        elif abs(el - es) <= noise:
            s += (f"a difference within the ±{noise:.2f} noise of your repeats, so this run cannot tell whether "
                  "the longer kernels scaled further.")
        elif el > es:
            s += (f"the longer kernels scaled further, beyond the ±{noise:.2f} noise of your repeats, as the "
                  "model's knee at t_kernel / t_overhead predicts.")
        else:
            s += (f"the longer kernels scaled less, beyond the ±{noise:.2f} noise of your repeats, against the "
                  "model's knee at t_kernel / t_overhead: something besides per-call overhead limited this run.")
        out.append(s)
    else:
        out.append("Fleet efficiency " + _run("section 4"))
    return out


def lab02(numbers: Mapping) -> list[str]:
    d = _lab(numbers, "02_restart_recovery")
    out = []
    p50, p95 = _num(d, "restart_p50_s"), _num(d, "restart_p95_s")
    if p50 is not None:
        out.append(f"A SIGKILLed actor answered again after {_ms(p50)} (p50)"
                   + (f", {_ms(p95)} (p95)" if p95 is not None else "")
                   + f": {p50 / CLAIMED_RESTART_S:.2g}× the claimed 30 ms, on a live node.")
    else:
        out.append("Restart latency " + _run("section 1"))
    lost, dup = _num(d, "at_most_once_lost"), _num(d, "at_least_once_duplicates")
    eo_d, eo_m = _num(d, "exactly_once_duplicates"), _num(d, "exactly_once_missing")
    if lost is not None and dup is not None:
        s = f"Retries off lost {lost:.0f} items; retries on applied {dup:.0f} effects twice"
        if eo_d is not None and eo_m is not None:
            s += f"; your idempotent worker: {eo_d:.0f} twice, {eo_m:.0f} missing"
        out.append(s + ".")
    else:
        out.append("Delivery under chaos " + _run("section 3"))
    rebuilt, gone = d.get("lineage_rebuilt"), d.get("lineage_lost")
    if isinstance(rebuilt, list) and isinstance(gone, list):
        s = (f"After the node loss lineage rebuilt {', '.join(rebuilt) or 'nothing'} and lost "
             f"{', '.join(gone) or 'nothing'}: ")
        if "task output" in rebuilt and gone and set(rebuilt) == {"task output"}:
            s += "lineage rebuilt the task output only; it is for task outputs, not state."
        elif "task output" in rebuilt and gone:
            s += ("lineage rebuilt more than the task output here, yet still lost objects: it is for task "
                  "outputs, not state.")
        elif not gone:
            s += "nothing was lost in this run, so it did not show lineage's documented limits."
        else:
            s += "lineage did not rebuild even the task output in this run; see what was lost."
        out.append(s)
    else:
        out.append("Lineage after node loss " + _run("section 4"))
    cold = _num(d, "cold_start_s")
    if cold is not None:
        out.append(f"A cold process start took {_ms(cold)} here: the floor under any container restart, "
                   "before Kubernetes' back-off is added.")
    return out


def lab03(numbers: Mapping) -> list[str]:
    d = _lab(numbers, "03_quotas")
    out = []
    none, quota = _num(d, "isolation_none"), _num(d, "isolation_quota")
    wave = _num(d, "isolation_resolution")
    if none is not None and quota is not None:
        s = (f"Under the flood the quiet tenants kept {none:.2f}× their solo throughput without quotas "
             f"and {quota:.2f}× with custom-resource quotas")
        if wave is None:
            s += "."
        elif abs(quota - none) <= wave:
            s += (f"; one wave of kernels moves these ratios by about {wave * 100:.0f} %, so this run cannot "
                  "tell the two apart.")
        else:
            s += (f", a difference larger than one wave of kernels (about {wave * 100:.0f} %): quotas "
                  + ("helped the quiet tenants here." if quota > none else "cost the quiet tenants here."))
        out.append(s)
    else:
        out.append("Isolation " + _run("sections 2 and 3"))
    peaks, quotas = d.get("quota_peaks"), d.get("quotas")
    if isinstance(peaks, dict) and isinstance(quotas, dict) and quotas:
        over = [t for t, q in quotas.items() if not (isinstance(peaks.get(t), (int, float)) and peaks[t] <= q)]
        out.append(f"Peak GPUs held under the flood: {peaks} for quotas {quotas} — "
                   + ("no tenant went over; every kernel here asked for its tenant's resource, and one "
                      "that does not is not counted."
                      if not over else f"{', '.join(over)} went over."))
    ratio, step = _num(d, "quota_throughput_ratio"), _num(d, "overhead_resolution")
    s = ""
    if ratio is not None:
        s = (f"Scheduling overhead at balanced saturation (every tenant wanting twice its quota): "
             f"{(1 - ratio) * 100:+.0f} % of throughput")
        if step is not None:
            s += f", measured in steps of {step * 100:.0f} % (one wave of kernels)"
        groups = _num(d, "quota_throughput_ratio_groups")
        if groups is not None:
            s += f"; placement groups {(1 - groups) * 100:+.0f} %"
        s += "."
    curve, work = loss_curve(d), workload_kernel_s(numbers)
    at = loss_at(curve, work[0]) if curve and work else None
    if at is not None:
        s += (" " if s else "") + (f"At your workload's kernel length ({_ms(work[0])}, {work[1]}"
                                   + (f"; read at {_ms(at['kernel_s'])}, the nearest length measured"
                                      if at["beyond"] else "")
                                   + f"), scheduling each kernel as a task left {at['quotas'] * 100:.0f} % of the "
                                   f"pool's GPU-time unused with quotas and {at['none'] * 100:.0f} % without")
        k15 = kernel_for_loss(curve)
        s += (f"; it falls to {CLAIMED_OVERHEAD * 100:.0f} % at about {_ms(k15)} kernels on this machine: "
              "the cost is per kernel, so longer tasks pay less." if k15 is not None else
              f"; not {CLAIMED_OVERHEAD * 100:.0f} % at any kernel length measured "
              f"({_ms(curve[0][0])}–{_ms(curve[-1][0])}).")
    elif ratio is not None:
        s += " Per-task scheduling against kernel length " + _run("exercise 1's sweep")
    out.append(s or "Quota overhead " + _run("exercise 1's cells"))
    fixed, cohort = _num(d, "idle_fraction_fixed"), _num(d, "idle_fraction_cohort")
    if fixed is not None and cohort is not None:
        s = (f"Under bursty demand fixed quotas left {fixed * 100:.0f} % of the pool's GPU-time idle while work "
             f"waited (a cost of this demand pattern, which any quota that cannot lend pays, a ResourceQuota's too, "
             f"not of Ray), borrowing in a cohort {cohort * 100:.0f} %")
        if fixed > 0 and cohort < fixed:
            s += f": lending recovered {(1 - cohort / fixed) * 100:.0f} % of what quotas that cannot lend cost."
        else:
            s += ": lending recovered none of it in this run."
        waits = d.get("wait_s")
        if isinstance(waits, dict) and all(isinstance(waits.get(k), dict) for k in ("shared pool", "cohort (yours)")):
            late = [t for t in sorted(waits["cohort (yours)"]) if isinstance(waits["shared pool"].get(t), (int, float))
                    and isinstance(waits["cohort (yours)"][t], (int, float))
                    and waits["shared pool"][t] > waits["cohort (yours)"][t]]
            if late:
                s += (f" In one shared pool tenant{'s' if len(late) > 1 else ''} {', '.join(late)} waited longer than "
                      "in the cohort: first come, first served lets a burst queue ahead of them.")
        out.append(s)
    else:
        out.append("The cost of quotas that cannot lend " + _run("exercise 3's cells"))
    partial, started = d.get("gang_partial_gpus"), d.get("gang_started")
    if isinstance(partial, dict) and isinstance(started, dict) and all(
            isinstance(x.get(k), (int, float)) for x in (partial, started) for k in ("actors", "placement groups")):
        s = (f"Two jobs needing more GPUs together than were free: placed an actor at a time, "
             f"{started['actors']:.0f} of 2 started and {partial['actors']:.0f} GPUs sat in jobs that could not; as "
             f"placement groups {started['placement groups']:.0f} of 2 started")
        if partial["placement groups"] == 0 and partial["actors"] > 0:
            s += ", with no GPU held by a job that waited: all or nothing."
        elif partial["placement groups"] == 0:
            s += " and no GPU was held by a job that waited."
        else:
            s += f", yet a waiting group held {partial['placement groups']:.0f} bundles."
        out.append(s)
    return out


def lab04(numbers: Mapping) -> list[str]:
    d = _lab(numbers, "04_data_affinity")
    out = []
    la, lb, lc = (_num(d, k) for k in ("locality_fraction_naive", "locality_fraction_tasks", "locality_fraction"))
    if la is not None:
        s = f"Locality on the uneven placement: naive actors {la:.2f}"
        s += f", tasks {lb:.2f}" if lb is not None else ""
        s += f", pinned actors {lc:.2f}" if lc is not None else ""
        out.append(s + ".")
    else:
        out.append("Locality " + _run("section 2"))
    naive, aware, total = (_num(d, k) for k in ("cross_node_bytes_naive", "cross_node_bytes_aware", "input_bytes"))
    if naive is not None:
        s = f"Ray itself copied {_mib(naive)} between nodes for the naive actors"
        if aware is not None:
            s += f" and {_mib(aware)} for the pinned ones"
        if total:
            s += f", of {_mib(total)} processed"
        out.append(s + (": data does move, and Ray moves it." if naive > 0
                        else ": the naive actors moved nothing in this run, so it did not show Ray moving data."))
    link = _num(d, "link_bytes_per_s")
    if link:
        out.append(f"One shard crossed an emulated link at {link / 1e6:,.0f} MB/s: localhost on this "
                   "machine, not a data-centre network; a sizing plan needs the rate of its own links.")
    if lb is not None and la is not None:
        if lb > la:
            out.append(f"Tasks that take the data as arguments kept more of it in place than naive actors "
                       f"({lb:.2f} vs {la:.2f}): Ray places tasks, not actors, by their data.")
        else:
            out.append(f"Tasks that take the data as arguments kept no more of it in place than naive actors "
                       f"({lb:.2f} vs {la:.2f}): this run did not show the documented preference of tasks "
                       "for the node holding their data.")
    return out


LIMITS = {  # lab 05: what the plan's limiting resource means for the count of GPUs
    "gpu": "the limit is the GPUs themselves, so a faster model or device lowers the count directly.",
    "overhead": ("the limit is per-call overhead: even the most actors the plan allows cannot keep a GPU busy "
                 "at its best batch, so larger batches or cheaper calls, not more GPUs, raise each one's rate."),
    "cpu": ("the limit is decoding (cpu): each node is bought for its CPU workers, and its GPUs wait on "
            "them."),
    "network": ("the limit is the network: each node's link runs out first, and its speed is an assumption "
                "(section 3), so state it with the answer."),
}


def _where05(d: Mapping) -> str:
    """What lab 05's pipeline ran on, in physical GPUs (its replicas share them), or this machine."""
    gpus, replicas, cores = _num(d, "gpus"), _num(d, "replicas"), _num(d, "cpu_cores")
    shared = f", {replicas:.0f} model replicas sharing {'them' if gpus and gpus > 1 else 'it'}" if replicas else ""
    used = _num(d, "gpus_used")
    if gpus is not None and gpus >= 1 and used is not None and 1 <= used < gpus:
        return f"on {used:.0f} of this machine's {gpus:.0f} physical GPUs (the ones its replicas held){shared}"
    if gpus is not None and gpus >= 1:
        return f"on {gpus:.0f} physical GPU{'s' if gpus != 1 else ''}{shared}"
    if gpus == 0:
        machine = f"{cores:.0f} CPU cores" if cores else "its CPU cores"
        logical = f"; the {replicas:.0f} replicas are logical GPUs sharing them" if replicas else ""
        return f"on this machine without a GPU ({machine}{logical})"
    return f"with {replicas:.0f} model replicas" if replicas else "on this machine"


def _one05(d: Mapping) -> str:
    """One of the plan's "GPUs": a GPU, or without one this machine's CPU counted as one device."""
    return "one device (this CPU, all its cores, counted as one GPU)" if _num(d, "gpus") == 0 else "one GPU"


def lab05(numbers: Mapping) -> list[str]:
    d = _lab(numbers, "05_capstone")
    out = []
    pred, pipe, pool = (_num(d, k) for k in ("predicted_images_per_s", "pipeline_images_per_s", "pool_images_per_s"))
    if pred and pipe is not None:
        s = (f"Your Ray Data pipeline delivered {pipe:,.0f} images/s {_where05(d)}, {pipe / pred:.2f}× the "
             f"{pred:,.0f} your plan predicted: ")
        if pipe < pred:
            s += ("the timed run also made the JPEGs, started the pool and ran Ray Data's scheduling, which the plan "
                  "does not count; this lab did not time those apart, so which of them made the gap is not measured.")
        else:
            s += ("the run beat its plan, so the plan's rates (section 1) and this run disagree, and this lab did not "
                  "measure why: re-measure both before you size a cluster with either.")
        out.append(s)
    else:
        out.append("Plan vs reality " + _run("section 5"))
    if pipe and pool:
        layouts = ("the two layouts differ: your pool made the JPEGs in the driver and decoded them inside its model "
                   "replicas, Ray Data made and decoded them in CPU tasks apart from its replicas, and each was "
                   "timed whole, so this run does not say which difference, or which Ray Data feature, ")
        if pipe >= pool:
            out.append(f"Ray Data ran at {pipe / pool:.2f}× the rate of your hand-written actor pool "
                       f"({pool:,.0f} images/s): {layouts}made it faster.")
        else:
            out.append(f"Your hand-written actor pool ran at {pool / pipe:.2f}× Ray Data's rate ({pool:,.0f} vs "
                       f"{pipe:,.0f} images/s): {layouts}cost Ray Data the difference.")
    gpus, limit, px = _num(d, "c8_gpus"), d.get("c8_limit"), _num(d, "image_px")
    if gpus is not None and limit in LIMITS:
        size = f" at {px:.0f}×{px:.0f}" if px else ""
        kind = ("devices like this machine's CPU (no GPU here)" if _num(d, "gpus") == 0
                else "GPUs of this machine's kind")
        s = f"For {C8_TARGET:,} images/s{size} your plan needs {gpus:,.0f} {kind}, "
        s += (f"at most the claim's {C8_GPUS}" if gpus <= C8_GPUS else f"{gpus / C8_GPUS:.3g}× the claim's {C8_GPUS}")
        s += " if throughput grows linearly with them (C1 questions that)"
        out.append(f"{s}; {LIMITS[limit]}")
    else:
        out.append("The plan for C8 " + _run("sections 3 and 5"))
    by, top = d.get("gpu_images_per_s_by_px"), _num(d, "measured_max_px")
    rates = ({int(k): float(v) for k, v in by.items() if isinstance(v, (int, float))}
             if isinstance(by, dict) else {})
    plan_by = d.get("c8_gpus_by_px")  # the plan's GPUs for 10k images/s at each side, whatever limits it
    needs = ({int(k): float(v) for k, v in plan_by.items() if isinstance(v, (int, float))}
             if isinstance(plan_by, dict) else {})
    limit_by = d.get("c8_limit_by_px") if isinstance(d.get("c8_limit_by_px"), dict) else {}
    one = _one05(d)
    if rates:
        sides = sorted(rates)
        lo, hi = sides[0], sides[-1]
        s = (f"By your plan {one} does {rates[lo]:,.0f} images/s at {lo}×{lo} and {rates[hi]:,.0f} at "
             f"{hi}×{hi}; ")
        if needs:  # judged by the plan itself: its limit may be the CPU or the network, not the GPU
            sides = sorted(needs)
            breaks = next((side for side in sides if needs[side] > C8_GPUS), None)
            unit = "devices" if _num(d, "gpus") == 0 else "GPUs"  # without a GPU the plan's unit is this CPU
            head, tail = (f"the plan needs at most C8's {C8_GPUS} {unit} at every side",
                          f"the plan needs {needs.get(breaks, 0):,.0f} {unit} (more than C8's {C8_GPUS}) at "
                          f"{breaks}×{breaks}")
            limit = limit_by.get(str(breaks)) if breaks is not None else None
            tail += f", limited by {limit}" if isinstance(limit, str) and limit in LIMITS else ""
        else:  # an older file: one GPU's rate against C8's per-GPU share
            breaks = next((side for side in sides if rates[side] < C8_PER_GPU), None)
            head = f"it stays above C8's {C8_PER_GPU:g} per GPU at every side"
            tail = f"it drops below C8's {C8_PER_GPU:g} per GPU at {breaks}×{breaks}"
        if breaks is None:
            s += head
            s += (f", though sides past {top:.0f} are extrapolated from your fit." if top is not None and sides[-1] > top
                  else ": image size alone did not break the claim.")
        else:
            s += tail
            s += (f", past the largest side you measured ({top:.0f}): an extrapolation of your fit."
                  if top is not None and breaks > top
                  else ", a side you measured: by this count C8 needs smaller images than that.")
        out.append(s)
    else:
        out.append("One GPU's rate by image size " + _run("sections 3 and 5"))
    mflop = _num(d, "model_mflop_per_image")
    rate = rates.get(int(px)) if px else None
    if mflop and rate:
        head = rate / C8_PER_GPU
        s = (f"This network costs {mflop:.1f} MFLOP an image, and by your plan {one} runs it at {head:.3g}× "
             "the rate C8 needs per GPU")
        if head >= 1:
            s += (f": a model about {head:.3g}× costlier per image (about {mflop * head:,.0f} MFLOP) would use up "
                  "that margin, if its rate falls with its FLOPs.")
        else:
            s += f": on this device the claim's {C8_GPUS} GPUs fall short before any larger model is tried."
        out.append(s)
    return out

RULES: dict[str, Callable[[Mapping], list[str]]] = {
    "00_measure": lab00, "01_actor_scaling": lab01, "02_restart_recovery": lab02,
    "03_quotas": lab03, "04_data_affinity": lab04,
    "05_capstone": lab05}


def bullets(lab: str, numbers: Mapping) -> list[str]:
    """Three to five sentences about ``lab`` from the learner's ``numbers``."""
    got = RULES[lab](numbers or {})
    return got[:5]


def markdown(lab: str, numbers: Mapping) -> str:
    """The bullets as a Markdown list under the heading the labs close with."""
    return "### What your numbers showed\n\n" + "\n".join(f"* {b}" for b in bullets(lab, numbers))
