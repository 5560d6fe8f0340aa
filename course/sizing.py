"""The numbers the capstone sizes a cluster from: the learner's own, from earlier labs'
result files (:mod:`course.results`), or measured here, quickly, when a file lacks them.

:func:`machine` returns the ``measured`` dict a ``plan`` takes, and one line per number
saying where it came from (which lab, measured now, or an assumption you may change).
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np

from . import backend, bench, kernels, pipeline, results

SIZES = (8, 16, 32, 64, 128, 256)   # batch sizes the model chooses from
ASSUMED_FAILURES_PER_GPU_HOUR = 0.1  # an assumption, not a measurement: change it to your fleet's
MAX_ACTORS_PER_GPU = 4


def kernel_rates(quick_images: int = 1024) -> dict:
    """images/s of the image kernel on one device, per batch size (interleaved, median)."""
    run = kernels.BatchRun(0, SIZES)
    calls = {n: max(1, quick_images // n) for n in SIZES}
    sweep = bench.interleaved({n: (lambda n=n: [run(n) for _ in range(calls[n])], calls[n] * n) for n in SIZES},
                              rounds=3)
    return {str(n): m.rate for n, m in sweep.items()}


def call_overhead(calls: int = 100) -> float:
    """Median seconds of one blocking call to a trivial Ray actor (the per-call overhead)."""
    import ray

    @ray.remote(num_cpus=0)
    class Echo:
        def ping(self):
            return None

    actor = Echo.remote()
    ray.get(actor.ping.remote())
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        ray.get(actor.ping.remote())
        times.append(time.perf_counter() - start)
    ray.kill(actor)
    return statistics.median(times)


def restart_time() -> float:
    """Seconds from ``ray.kill`` of an actor (``max_restarts=1``) until its new process answers
    (:func:`course.faults.restart`, lab 02's measurement)."""
    import ray

    from . import faults

    @ray.remote(num_cpus=0, max_restarts=1)
    class Idle:
        pass

    actor = Idle.remote()
    seconds = faults.restart(actor)
    ray.kill(actor, no_restart=True)
    return seconds


def preprocess_rate(images: int = 2048) -> float:
    """images/s one CPU worker preprocesses (:func:`course.pipeline.preprocess`, a centre crop)."""
    raw = pipeline.raw(0, np.arange(images))
    best = min(bench.time_call(lambda: pipeline.preprocess({"id": None, "image": raw}), sync=False)
               for _ in range(5))
    return images / best


def copy_rate(mib: int = 64) -> float:
    """bytes/s of ``ray.get`` of an object another process made, on this machine (shared
    memory: an upper bound for a network link)."""
    import ray

    @ray.remote(num_cpus=0)
    def make(n):
        return np.ones(n, dtype=np.uint8)

    times = []
    for _ in range(3):
        ref = make.remote(mib * 2**20)
        ray.wait([ref], fetch_local=False)
        start = time.perf_counter()
        ray.get(ref)
        times.append(time.perf_counter() - start)
        del ref
    return mib * 2**20 / statistics.median(times)


def machine(devices: int, folder: str = ".") -> tuple[dict, list[str]]:
    """(measured numbers for ``plan``, where each came from) for this machine as one node of
    ``devices`` GPUs (replicas), from the result files in ``folder`` or measured now."""
    found = results.load_all(folder)
    lab0, lab1 = found.get("00_measure", {}), found.get("01_actor_scaling", {})
    lab2, lab3, lab4 = found.get("02_restart_recovery", {}), found.get("03_quotas", {}), found.get("04_data_affinity", {})
    m, notes = {}, []

    def take(key, value, where):
        m[key] = value
        notes.append(f"{key}: {value:,.6g} ({where})" if isinstance(value, (int, float)) else f"{key}: ({where})")

    rates = {k: v for k, v in (lab0.get("kernel_images_per_s") or {}).items() if isinstance(v, (int, float)) and v > 0}
    if len(rates) >= 3 and "256" in rates:
        take("kernel_images_per_s", {k: float(v) for k, v in rates.items()}, f"lab 00, batch sizes {', '.join(rates)}")
    else:
        take("kernel_images_per_s", kernel_rates(), f"measured now on {backend.name()}: no lab 00 sweep up to 256 images in its file")
    overhead = lab1.get("call_overhead_s") or lab1.get("call_p50_s")
    take("call_overhead_s", float(overhead) if overhead else call_overhead(),
         "lab 01" if overhead else "measured now: median blocking call to a trivial actor")
    restart = lab2.get("restart_p50_s")
    take("restart_s", float(restart) if restart else restart_time(),
         "lab 02, p50" if restart else "measured now: one actor restart")
    share = (lab3.get("tenant_share") or {}).get("a")
    take("quota_share", float(share) if share else 1.0,
         "lab 03: tenant a's share of the pool" if share else "the whole machine: lab 03's file lacks a share")
    link = lab4.get("link_bytes_per_s")
    take("link_bytes_per_s", float(link) if link else copy_rate(),
         "lab 04, between emulated nodes" if link else "measured now: ray.get within this machine (shared memory)")
    take("cpu_images_per_s", preprocess_rate(), "measured now: pipeline.preprocess on one core")
    take("failures_per_gpu_hour", ASSUMED_FAILURES_PER_GPU_HOUR, "an assumption, not measured: change it")
    take("gpus_per_node", int(devices), "this machine: " + ("real GPUs" if backend.on_gpu() else "logical GPUs"))
    take("cpus_per_node", int(os.cpu_count() or 1), "this machine's cores")
    take("max_actors_per_gpu", MAX_ACTORS_PER_GPU, "the model's cap")
    return m, notes
