"""Each lab's measured numbers, kept in one small JSON file next to the learner's notebook.

A lab's given code calls :func:`save` right after the cell that measures a number; its verdict
cell, the course report (``python -m course.report``) and the capstone read them back with
:func:`load` / :func:`load_all`. A missing, partial or unreadable file is never an error: the
reader gets ``{}`` (or fewer keys) and says which lab measures what is missing.

The file ``<folder>/results/<lab>.json`` holds::

    {"lab": "02_restart_recovery", "schema": 1, "fingerprint": "numpy-cpu-2c-1a2b3c",
     "saved_at": "2025-01-01T12:00:00+00:00", "numbers": {"restart_p50_s": 1.4, ...}}

``fingerprint`` is the machine's :func:`course.backend.fingerprint`: a save on another machine
starts the lab's numbers afresh, so numbers from two machines are never mixed in one file.
Each save merges its keys into the file (re-running one cell updates that cell's keys only).

The keys each lab may save, with their unit and meaning (:data:`SCHEMA`):

``00_measure``
    ``backend`` (str: "numpy" or "cupy"), ``fingerprint`` (str), ``image_px`` (int: pixels
    per image side, 64), ``kernel_images_per_s`` (dict: str(batch size) -> images/s of the
    image kernel on one device at ``image_px``), ``best_batch`` (int: the batch size your
    ``best_batch_size`` chose), ``best_images_per_s`` (images/s at ``best_batch``, section 7).
``01_actor_scaling``
    ``call_p50_s`` / ``call_p99_s`` (s: round trip of one blocking trivial actor call),
    ``call_overhead_s`` (s: per-call overhead fitted from trivial calls through ``run_pool``),
    ``actor_images_per_s`` (images/s: one real-kernel actor, best call size),
    ``actor_images_per_s_by_batch`` (dict: str(images per call) -> images/s),
    ``fleet_size`` (int: emulated GPUs in the largest fleet measured), ``short_kernel_s`` /
    ``long_kernel_s`` (s: the two emulated kernel durations), ``efficiency_short`` /
    ``efficiency_long`` (fraction: rate at ``fleet_size`` / (``fleet_size`` x rate at 1)),
    ``knee_actors`` / ``knee_actors_long`` (int or null: first fleet size with efficiency
    < 0.5 with the short / long kernel; null when not reached), ``efficiency_spread`` (fraction:
    the largest relative spread, IQR / median, of the timed repeats behind the rates at N = 1 and
    N = ``fleet_size``, both kernels; the verdict's noise on the efficiencies is twice it).
``02_restart_recovery``
    ``restart_p50_s`` / ``restart_p95_s`` (s: SIGKILL -> answered by a new process),
    ``restart_samples_s`` (list of s), ``cold_start_s`` (s: fresh Python + imports + first
    kernel call, median), ``lineage_rebuilt`` / ``lineage_lost`` (lists of object kinds after
    node loss), ``at_most_once_lost`` / ``at_least_once_duplicates`` (int: items lost / effects
    applied twice in the chaos runs with Ray's retries off / on), ``exactly_once_duplicates``
    / ``exactly_once_missing`` (int: the same for your idempotent worker).
``03_quotas``
    ``quota_throughput_ratio`` (saturated throughput with custom-resource quotas / without,
    same run), ``quota_throughput_ratio_groups`` (the same with placement groups),
    ``tenant_share`` (dict: tenant -> fraction of the kernels finished on the saturated pool
    with custom-resource quotas), ``quotas`` (dict: tenant -> GPUs), ``quota_peaks`` /
    ``quota_peaks_groups`` (dict: tenant -> most GPUs held at once under the flood),
    ``isolation_none`` / ``isolation_quota`` (the quiet tenants' throughput under the flood /
    solo, lower of the two, without quotas / with custom resources); ``isolation_resolution``
    (fraction: one wave of emulated kernels as a share of the flood and solo runs' window,
    kernel_s / window_s); ``overhead_resolution``
    (fraction: one wave of emulated kernels as a share of the saturated runs' window,
    kernel_s / window_s: the smallest throughput change one run can show);
    ``kernel_s`` (s: the lab's emulated kernel), ``scheduling_loss`` (dict: str(emulated kernel
    seconds) -> {"quotas", "none": share of the saturated pool's GPU-time no kernel held, with
    custom-resource quotas / without; "spread": |difference| / mean of each policy's
    rounds, summed});
    ``idle_fraction_fixed`` / ``idle_fraction_cohort`` / ``idle_fraction_shared`` (fraction: under
    bursty demand, GPU-time idle while work waited over the pool's GPU-time, for fixed quotas,
    borrowing within a cohort and one shared pool), ``wait_s`` (dict: policy -> tenant -> mean
    seconds from a kernel's arrival to its start); ``gang_partial_gpus`` / ``gang_started``
    (dict: "actors" or "placement groups" -> GPUs held by jobs that could not start / jobs that
    started, two jobs of k GPUs on 2k - 2 free GPUs).
``04_data_affinity``
    ``nodes`` (int: nodes of the emulated cluster), ``input_bytes`` (bytes processed per run),
    ``locality_fraction`` (fraction of bytes processed where they lay, pinned actors (c)),
    ``locality_fraction_naive`` / ``locality_fraction_tasks`` (the same for (a) and (b)),
    ``cross_node_bytes_naive`` / ``cross_node_bytes_aware`` / ``cross_node_bytes_tasks``
    (bytes copied between object stores per run by (a), (c) and (b)); all on the uneven
    placement, median of the runs. ``link_bytes_per_s`` (bytes/s: ``ray.get`` of a shard held
    on another node of the emulated cluster, median of a few).
``05_capstone``
    ``predicted_images_per_s`` / ``pipeline_images_per_s`` / ``pool_images_per_s`` (images/s:
    the plan's prediction, the Ray Data pipeline, the hand-written actor pool; each timed end to
    end), ``gpus`` (int: this machine's physical GPUs, 0 without one), ``gpus_used`` (int: the
    GPUs the pipeline's replicas held, each at most one, so min(gpus, replicas); C8's per-GPU
    rate divides by it, or by ``gpus`` in a file without it), ``replicas`` (int: model replicas, sharing those GPUs), ``cpu_cores`` (int:
    this machine's cores, the unit without a GPU), ``pipeline_images`` (int: images of each timed
    run), ``model_load_s`` (s: one replica's model load, measured), ``image_px`` (int: the network's input side, 224), ``model_mflop_per_image`` (MFLOP of one
    image through the network, counted from its layers), ``gpu_images_per_s_by_px`` (dict
    str(side) -> images/s of one GPU by the plan, from the measured size fit),
    ``measured_max_px`` (int: the largest side measured; larger ones are extrapolated),
    ``c8_limit`` / ``c8_gpus`` (the plan's limiting resource and GPUs for 10k images/s at 224),
    ``c8_gpus_by_px`` / ``c8_limit_by_px`` (dicts str(side) -> the same at each side: C8 stops
    holding where the plan needs more than 200 GPUs, whatever limits it).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import tempfile
from pathlib import Path

SCHEMA_VERSION = 1

SCHEMA: dict[str, dict[str, str]] = {
    "00_measure": {
        "backend": "str — array backend that ran the kernel: 'numpy' or 'cupy'",
        "fingerprint": "str — course.backend.fingerprint() of this machine",
        "image_px": "int — pixels per image side",
        "kernel_images_per_s": "dict str(batch size) -> images/s — the image kernel on one device at image_px",
        "best_batch": "int — the batch size best_batch_size chose",
        "best_images_per_s": "images/s — the image kernel at best_batch (bench.measure)",
    },
    "01_actor_scaling": {
        "call_p50_s": "s — median round trip of one blocking trivial actor call",
        "call_p99_s": "s — 99th percentile round trip of one blocking trivial actor call",
        "call_overhead_s": "s — per-call overhead fitted from trivial calls through run_pool",
        "actor_images_per_s": "images/s — one real-kernel actor, best call size measured",
        "actor_images_per_s_by_batch": "dict str(images per call) -> images/s — one real-kernel actor",
        "fleet_size": "int — emulated GPUs in the largest fleet measured",
        "short_kernel_s": "s — the short emulated kernel",
        "long_kernel_s": "s — the long emulated kernel",
        "efficiency_short": "fraction — rate at fleet_size / (fleet_size × rate at 1), short kernel",
        "efficiency_long": "fraction — the same, long kernel",
        "knee_actors": "int or null — first fleet size with efficiency < 0.5, short kernel (null: not reached)",
        "knee_actors_long": "int or null — the same, long kernel",
        "efficiency_spread": "fraction — largest relative spread (IQR / median) of the timed repeats behind the "
                             "rates at N = 1 and N = fleet_size, both kernels",
    },
    "02_restart_recovery": {
        "restart_p50_s": "s — median SIGKILL -> answered by a new process",
        "restart_p95_s": "s — 95th percentile of the same",
        "restart_samples_s": "list of s — every measured restart",
        "cold_start_s": "s — median cold start: fresh Python, imports, first kernel call",
        "lineage_rebuilt": "list of str — objects rebuilt after node loss",
        "lineage_lost": "list of str — objects lost after node loss",
        "at_most_once_lost": "int — items lost with Ray's retries off",
        "at_least_once_duplicates": "int — effects applied twice with retries on, no idempotence",
        "exactly_once_duplicates": "int — effects applied twice by your idempotent worker",
        "exactly_once_missing": "int — effects missing with your idempotent worker",
    },
    "03_quotas": {
        "quota_throughput_ratio": "ratio — saturated throughput with custom-resource quotas / without, same run",
        "quota_throughput_ratio_groups": "ratio — the same with placement groups",
        "tenant_share": "dict tenant -> fraction of kernels finished on the saturated pool, custom-resource quotas",
        "quotas": "dict tenant -> GPUs of its quota",
        "quota_peaks": "dict tenant -> most GPUs held at once under the flood, custom-resource quotas",
        "quota_peaks_groups": "dict tenant -> the same with placement groups",
        "isolation_none": "ratio — quiet tenants' throughput under the flood / solo (lower of two), no quotas",
        "isolation_quota": "ratio — the same with custom-resource quotas",
        "isolation_resolution": "fraction — one wave of kernels / the flood and solo runs' window (kernel_s / window_s)",
        "overhead_resolution": "fraction — one wave of kernels / the saturated runs' window (kernel_s / window_s)",
        "kernel_s": "s — the lab's emulated kernel (a sleep)",
        "scheduling_loss": "dict str(emulated kernel s) -> {quotas, none: share of the saturated pool's GPU-time no "
                           "kernel held, with custom-resource quotas / without; spread: |difference| / mean of "
                           "each policy's rounds, summed}",
        "idle_fraction_fixed": "fraction — GPU-time idle while work waited / the pool's GPU-time, bursty demand, fixed quotas",
        "idle_fraction_cohort": "fraction — the same, borrowing within a cohort (Kueue's model, emulated)",
        "idle_fraction_shared": "fraction — the same, one shared pool, first come first served",
        "wait_s": "dict policy -> dict tenant -> mean seconds a kernel waited from arrival to start, bursty demand",
        "gang_partial_gpus": "dict way -> GPUs held by jobs that could not start (two jobs of k GPUs on 2k - 2)",
        "gang_started": "dict way -> jobs of the two that started (actors one at a time: within the wait; groups)",
    },
    "04_data_affinity": {
        "nodes": "int — nodes of the emulated cluster",
        "input_bytes": "bytes — input processed per run",
        "locality_fraction": "fraction — bytes processed where they lay, pinned actors (c), uneven placement",
        "locality_fraction_naive": "fraction — the same, naive actors (a)",
        "locality_fraction_tasks": "fraction — the same, tasks (b)",
        "cross_node_bytes_naive": "bytes — copied between object stores per run, naive actors (a)",
        "cross_node_bytes_aware": "bytes — the same, pinned actors (c)",
        "cross_node_bytes_tasks": "bytes — the same, tasks (b)",
        "link_bytes_per_s": "bytes/s — ray.get of a shard held on another node, median of a few",
    },
    "05_capstone": {
        "predicted_images_per_s": "images/s — the plan's prediction for this machine",
        "pipeline_images_per_s": "images/s — the Ray Data pipeline, measured",
        "pool_images_per_s": "images/s — the hand-written actor pool, measured",
        "gpus": "int — physical GPUs of this machine, 0 without one",
        "gpus_used": "int — physical GPUs the pipeline's replicas held (each at most one: min(gpus, replicas)); "
                     "per-GPU rate = pipeline / gpus_used",
        "replicas": "int — model replicas of the pipeline (they share the GPUs; logical GPUs without one)",
        "cpu_cores": "int — this machine's CPU cores (without a GPU the unit is this machine)",
        "pipeline_images": "int — images of each timed end-to-end run",
        "model_load_s": "s — one model replica's load, measured (the timed runs include it)",
        "image_px": "int — the network's input side (pixels)",
        "model_mflop_per_image": "MFLOP — one image through the network, counted from its layers",
        "gpu_images_per_s_by_px": "dict str(side) -> images/s of one GPU by the plan (measured size fit)",
        "measured_max_px": "int — the largest side measured; larger sides are extrapolated",
        "c8_gpus_by_px": "dict str(side) -> GPUs the plan needs for 10k images/s, whatever limits it",
        "c8_limit_by_px": "dict str(side) -> the plan's limiting resource at that side",
        "c8_limit": "str — the plan's limiting resource for 10k images/s at image_px",
        "c8_gpus": "int — GPUs the plan needs for 10k images/s at image_px",
    },
}

LABS = tuple(SCHEMA)


def path(lab: str, folder: str | os.PathLike = ".") -> Path:
    """Where ``lab``'s numbers live: ``<folder>/results/<lab>.json``."""
    return Path(folder) / "results" / f"{lab}.json"


def plain(value):
    """``value`` as plain JSON data: NumPy scalars and arrays, tuples and sets converted,
    dict keys as strings, NaN and infinities as None (JSON has neither)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(plain(v) for v in value)
    if hasattr(value, "tolist"):  # NumPy (and CuPy) scalars and arrays
        return plain(value.tolist())
    if hasattr(value, "item"):
        return plain(value.item())
    raise TypeError(f"{type(value).__name__} is not a number, string, list or dict: cannot save {value!r}")


def _check(lab: str, numbers: dict) -> None:
    """Raise ValueError for an unknown lab or a key its schema does not list."""
    if lab not in SCHEMA:
        raise ValueError(f"unknown lab {lab!r}: one of {', '.join(LABS)}")
    unknown = [k for k in numbers if k not in SCHEMA[lab]]
    if unknown:
        raise ValueError(f"{lab} has no result key {unknown[0]!r} (course.results.SCHEMA lists "
                         f"{', '.join(SCHEMA[lab])})")


def _fingerprint() -> str:
    from course import backend  # here, not at import: backend may look for a GPU

    return backend.fingerprint()


def record(lab: str, folder: str | os.PathLike = ".") -> dict:
    """The whole stored record of ``lab`` (lab, schema, fingerprint, saved_at, numbers), or
    ``{}`` when the file is missing, unreadable, of another schema or another lab's."""
    try:
        data = json.loads(path(lab, folder).read_text())
    except (OSError, ValueError):
        return {}
    if (not isinstance(data, dict) or data.get("lab") != lab or data.get("schema") != SCHEMA_VERSION
            or not isinstance(data.get("numbers"), dict)):
        return {}
    known = SCHEMA.get(lab, {})
    return {**data, "numbers": {k: v for k, v in data["numbers"].items() if k in known}}


def load(lab: str, folder: str | os.PathLike = ".") -> dict:
    """``lab``'s numbers, ``{}`` when none are readable; never raises."""
    try:
        return dict(record(lab, folder).get("numbers", {}))
    except Exception:  # a reader's last line of defence: a report must render regardless
        return {}


def load_all(folder: str | os.PathLike = ".") -> dict[str, dict]:
    """Every lab's numbers, ``{lab: numbers}``; a lab with no file maps to ``{}``."""
    return {lab: load(lab, folder) for lab in LABS}


def save(lab: str, numbers: dict, folder: str | os.PathLike = ".") -> Path:
    """Merge ``numbers`` into ``lab``'s file and return its path.

    Keys are checked against :data:`SCHEMA` (an unknown key raises ValueError naming it;
    missing keys are fine); values are converted to plain JSON. The file is replaced
    atomically, so a crash mid-write never leaves half a file.
    """
    _check(lab, numbers)
    fresh = {k: plain(v) for k, v in numbers.items()}
    fingerprint = fresh.get("fingerprint") if lab == "00_measure" and fresh.get("fingerprint") else _fingerprint()
    old = record(lab, folder)
    kept = old.get("numbers", {}) if old.get("fingerprint") == fingerprint else {}
    data = {"lab": lab, "schema": SCHEMA_VERSION, "fingerprint": fingerprint,
            "saved_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "numbers": {**kept, **fresh}}
    target = path(lab, folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{lab}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
