"""The numbers the capstone sizes a cluster from: measured here (the model, JPEG decoding, JPEG
sizes), taken from earlier labs' result files (:mod:`course.results`), or stated assumptions.

:func:`machine` returns the ``measured`` dict a ``plan`` takes, and one line per number saying
where it came from: which lab, measured now, computed from the installed Ray's configuration,
or **an assumption** (the network link and the failure rate: change them).

What the sizing model leaves out is measured where this machine can measure it, and said where
it cannot: the copy of each batch from host memory to the GPU (:func:`host_to_device`: the
per-batch rates time batches already on the device) and the GPU memory one replica's forward
pass takes (:func:`gpu_memory`: Ray does not account GPU memory); both are "not measured"
without a GPU.

Sizes: the network and the decoder are measured at :data:`SCALING_PX` (three sides at least)
and a line ``seconds per image = a + b * px²`` is fitted (:func:`fit`); a size outside the
measured range is an **extrapolation** of that line, and the notebook labels it so.
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np

from . import backend, bench, convnet, pipeline, results

BATCHES = (8, 16, 32, 64)                     # batch sizes the model's rate is measured at (CPU)
GPU_BATCHES = (8, 16, 32, 64, 128, 256)       # ... and on a GPU
BASE_PX = convnet.INPUT_PX                    # the side every per-batch rate is measured at
SCALING_PX = (64, 128, 224)                   # sides the size scaling is measured at (CPU) ...
GPU_SCALING_PX = (224, 448, 896)              # ... and on a GPU
# Network links, in Gbit/s: typical datacentre Ethernet speeds, named as assumptions (this
# course measures no network: its "nodes" share one machine).
LINK_GBIT_S = (10, 25, 100)
ASSUMED_LINK_GBIT_S = 25
ASSUMED_FAILURES_PER_GPU_HOUR = 0.1  # an assumption, not a measurement: change it to your fleet's
# What a lost node costs before its work runs again when no spare GPU waits in the cluster:
# stated inputs, not measurements (this course starts no cloud node and pulls no image): a new
# node provisioned and joined, its GPU driver loaded and NVIDIA's device plugin advertising
# nvidia.com/gpu (kubernetes.io "Schedule GPUs"), and the container image pulled. Change them
# to your fleet's; ``replacement=None`` says a spare GPU already waits (nothing to replace).
ASSUMED_REPLACEMENT = {"node_provision_s": 120.0, "gpu_ready_s": 60.0, "image_gb": 10.0, "pull_gbit_s": 1.0}
MAX_ACTORS_PER_GPU = 4


def batches() -> tuple[int, ...]:
    return GPU_BATCHES if backend.on_gpu() else BATCHES


def scaling_px() -> tuple[int, ...]:
    return GPU_SCALING_PX if backend.on_gpu() else SCALING_PX


def _images(n: int, px: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng([seed, px, n])
    return rng.integers(0, 256, (int(n), int(px), int(px), 3), dtype=np.uint8)


def model_rates(px: int = BASE_PX, sizes=None, images: int | None = None, rounds: int = 3) -> dict:
    """images/s of the network on one device at side ``px``, per batch size (interleaved, median)."""
    sizes = tuple(sizes or batches())
    images = images or (2048 if backend.on_gpu() else 96)
    bench.steady_allocator()
    net = convnet.Network()
    data = {b: backend.to_device(_images(b, px, b)) for b in sizes}
    calls = {b: max(1, images // b) for b in sizes}

    def run(b):
        for _ in range(calls[b]):
            convnet.forward(data[b], net.params)

    sweep = bench.interleaved({b: (lambda b=b: run(b), calls[b] * b) for b in sizes}, rounds=rounds)
    return {str(b): m.rate for b, m in sweep.items()}


def physical_gpus() -> int:
    """GPUs this machine has (CUDA devices CuPy sees); 0 without one."""
    if not backend.on_gpu():
        return 0
    import cupy

    return int(cupy.cuda.runtime.getDeviceCount())


NOT_ON_CPU = "not measured: this machine has no GPU (NumPy computes where the data already is)"


def host_to_device(batch: int = 64, px: int = BASE_PX, rounds: int = 5) -> dict:
    """The copy :func:`model_rates` leaves out: ``cupy.asarray`` of a batch of ``batch`` images
    (uint8, ``px`` square) from ordinary (pageable) host memory, timed with the device
    synchronised before and after (median of ``rounds``, after one warm-up copy). Returns
    ``measured`` (False without a GPU, with the reason in ``note``), ``seconds_per_image``,
    ``bytes_per_s`` and ``batch``."""
    if not backend.on_gpu():
        return {"measured": False, "note": NOT_ON_CPU}
    import cupy

    host = _images(batch, px, seed=1)

    def copy():
        cupy.asarray(host)

    copy()  # warm: the first allocation of this size
    seconds = statistics.median(bench.time_call(copy) for _ in range(int(rounds)))
    return {"measured": True, "seconds_per_image": seconds / batch, "bytes_per_s": host.nbytes / seconds,
            "batch": int(batch), "note": f"measured now: cupy.asarray of {batch} images of {px}x{px}x3 uint8 "
            f"({host.nbytes / 2**20:.1f} MiB) from pageable host memory, synchronised, median of {rounds}"}


def gpu_memory(batch: int = 64, px: int = BASE_PX) -> dict:
    """GPU memory one replica's forward pass holds at ``batch``: the bytes CuPy's memory pool
    holds after one forward pass from an empty pool (its high-water mark, in CuPy's block
    sizes; each process's CUDA context comes on top, not counted), and the device's total.
    Ray does not account GPU memory: a fractional ``num_gpus`` is a share of a count, and each
    replica must fit in what the others leave. ``measured`` is False without a GPU."""
    if not backend.on_gpu():
        return {"measured": False, "note": NOT_ON_CPU}
    import cupy

    pool = cupy.get_default_memory_pool()
    net = convnet.Network()
    data = backend.to_device(_images(batch, px, seed=2))
    backend.sync()
    pool.free_all_blocks()
    base = pool.total_bytes()
    convnet.forward(data, net.params)
    backend.sync()
    used = pool.total_bytes() - base
    free, total = cupy.cuda.runtime.memGetInfo()
    return {"measured": True, "forward_bytes": int(used), "device_bytes": int(total), "free_bytes": int(free),
            "batch": int(batch), "note": f"measured now: CuPy's memory pool after one forward pass of {batch} "
            f"images of {px}x{px} (weights and input excluded, the CUDA context not counted)"}


def fit(px, seconds) -> tuple[float, float]:
    """(a, b) of ``seconds per image = a + b * px²``, least squares over the measured sides
    (a is clipped at 0: a negative fixed cost is noise)."""
    x = np.asarray(px, dtype=float) ** 2
    b, a = np.polyfit(x, np.asarray(seconds, dtype=float), 1)
    if a < 0:
        b, a = float(np.dot(x, seconds) / np.dot(x, x)), 0.0
    return float(a), float(b)


def fixed_fraction(a: float, b: float, px: int = BASE_PX) -> float:
    """The part of one image's time at ``px`` that does not grow with its pixels."""
    return a / (a + b * px ** 2)


def model_scaling(sides=None, batch: int | None = None, images: int | None = None) -> dict:
    """The network's seconds per image on one device at each side (best of 3), and the fit."""
    sides = tuple(sides or scaling_px())
    batch = batch or (64 if backend.on_gpu() else 16)
    net = convnet.Network()
    out = {}
    for px in sides:
        n = images or max(batch, int((256 if backend.on_gpu() else 48) * (224 / px) ** 2) // batch * batch)
        data = backend.to_device(_images(batch, px))
        convnet.forward(data, net.params)  # warm: allocations, cuBLAS plans
        best = min(bench.time_call(lambda: [convnet.forward(data, net.params) for _ in range(n // batch)])
                   for _ in range(3))
        out[px] = best / (n // batch * batch)
    a, b = fit(list(out), list(out.values()))
    return {"seconds_per_image": out, "fit": (a, b), "batch": batch}


def decode_scaling(sides=None, images: int = 32) -> dict:
    """One CPU core decoding JPEGs of each side (and resizing to that side): seconds per image
    (best of 3), the fit, and the mean JPEG size in bytes with its own fit."""
    sides = tuple(sides or scaling_px())
    secs, size = {}, {}
    for px in sides:
        n = max(8, int(images * (224 / px) ** 2))
        data = pipeline.jpegs(1, np.arange(n), px)
        size[px] = float(np.mean([len(d) for d in data]))
        best = min(bench.time_call(lambda: pipeline.decode_all(data, px), sync=False) for _ in range(3))
        secs[px] = best / n
    return {"seconds_per_image": secs, "fit": fit(list(secs), list(secs.values())),
            "jpeg_bytes": size, "jpeg_fit": fit(list(size), list(size.values()))}


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


def node_detection() -> dict:
    """Seconds Ray's GCS takes to declare a node dead, computed from the health-check settings of
    the installed Ray (``src/ray/common/ray_config_def.h``): ``threshold x period`` when the
    node's checks fail at once (a refused connection), ``threshold x (timeout + period)`` when
    they time out (a node that vanished)."""
    from ray._raylet import Config

    period, timeout = Config.health_check_period_ms() / 1000, Config.health_check_timeout_ms() / 1000
    threshold = Config.health_check_failure_threshold()
    return {"refused_s": threshold * period, "timed_out_s": threshold * (timeout + period),
            "period_s": period, "timeout_s": timeout, "threshold": threshold}


def availability(failures_per_gpu_hour: float, gpus_per_failure: float, downtime_s: float) -> float:
    """The fraction of time a GPU is up when failures come at ``failures_per_gpu_hour`` (per GPU,
    per hour), each takes ``gpus_per_failure`` GPUs down (a lost node: all its GPUs; a failed GPU
    whose raylet lives: one) for ``downtime_s`` (detection + restart): MTBF / (MTBF + MTTR) =
    ``1 / (1 + failures_per_gpu_hour x gpus_per_failure x downtime_s / 3600)``, never below 0
    however high the rate (a linear ``1 - rate x downtime`` goes negative)."""
    return 1 / (1 + float(failures_per_gpu_hour) * float(gpus_per_failure) * float(downtime_s) / 3600)


def failure_cost(detect: dict, restart_s: float, restart_where: str, *,
                 gpu_failure_detect_s: float | None = None, replace_s: float = 0.0,
                 replace_why: str | None = None) -> tuple[dict, list[str]]:
    """``detect_s`` and ``restart_s`` -- the seconds one failure keeps its GPUs down, counted in the
    plan's uptime, :func:`availability` -- with one note each saying what they count and what
    they leave out (how many GPUs one failure takes down is ``gpus_per_failure``, set by
    :func:`machine`: the node's GPUs for a lost node, one for a failed GPU).

    Two failure cases, and the caller states which:

    * **a node is lost** (the default): Ray's GCS health check stops hearing the node's raylet;
      ``detect_s`` is computed from the installed Ray's settings (:func:`node_detection`, the
      timed-out case);
    * **a GPU fails while its raylet lives** (an Xid error, a GPU off the bus): the GCS health
      check probes the raylet, not the GPU, so Ray never detects it; pass
      ``gpu_failure_detect_s``, the seconds your own GPU probe takes to notice, a **stated
      input**, not a measurement (on Kubernetes NVIDIA's device plugin marks a GPU with a
      critical Xid unhealthy, so no new pod is given it: its ``internal/rm/health.go``).

    ``restart_s`` is the actor restart measured on a live node (lab 02) plus ``replace_s``, the
    seconds a replacement takes to join: 0 unless stated, which assumes a spare GPU already in
    the cluster; a real replacement adds scheduling, a multi-GB image pull and often a new node
    (:func:`replacement_s` adds them up from stated inputs; ``replace_why`` is its note).
    """
    if gpu_failure_detect_s is None:
        detect_s = detect["timed_out_s"]
        detect_note = (f"computed from this Ray's health checks: {detect['threshold']} x ({detect['timeout_s']:g} s "
                       f"timeout + {detect['period_s']:g} s period) for a node that stops answering "
                       f"({detect['refused_s']:g} s when its checks are refused at once); the case counted: a lost "
                       "node. Not counted: a GPU that fails while its raylet lives, which Ray's health check "
                       "(it probes the raylet) never sees: state gpu_failure_detect_s to count it")
    else:
        detect_s = float(gpu_failure_detect_s)
        detect_note = ("a stated input, not measured: the GPU-failure case, a GPU that fails while its raylet "
                       "lives and that Ray never detects; the seconds your own GPU probe takes to notice")
    restart_note = f"{restart_where}; plus replace_s = {replace_s:g} s, " + (
        "assumed: a spare GPU already in the cluster (not counted: scheduling, image pull, a new node)"
        if not replace_s else (replace_why or "a stated input: a replacement's scheduling, image pull and node start"))
    return ({"detect_s": detect_s, "restart_s": float(restart_s) + float(replace_s)}, [detect_note, restart_note])


def replacement_s(node_provision_s: float, gpu_ready_s: float, image_gb: float, pull_gbit_s: float) -> tuple[float, str]:
    """(seconds, note) a lost node's replacement takes before its work runs again, from stated
    inputs (none is measured here): provisioning the node, its GPU driver and device plugin
    getting ready, and pulling an image of ``image_gb`` GB at ``pull_gbit_s`` Gbit/s."""
    pull = float(image_gb) * 8 / float(pull_gbit_s)
    seconds = float(node_provision_s) + float(gpu_ready_s) + pull
    return seconds, (f"stated inputs, not measured (set them to your fleet's): node_provision_s = {node_provision_s:g} s, "
                     f"gpu_ready_s = {gpu_ready_s:g} s (GPU driver and device plugin ready), an image of "
                     f"{image_gb:g} GB pulled at {pull_gbit_s:g} Gbit/s = {pull:g} s")


def copy_rate(mib: int = 64) -> float:
    """bytes/s of ``ray.get`` of an object another process made, on this machine: a copy in
    shared memory, not a network transfer."""
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


def machine(replicas: int, folder: str = ".", *, link_gbit_s: float = ASSUMED_LINK_GBIT_S,
            failures_per_gpu_hour: float = ASSUMED_FAILURES_PER_GPU_HOUR,
            gpu_failure_detect_s: float | None = None,
            replacement: dict | None = ASSUMED_REPLACEMENT) -> tuple[dict, list[str]]:
    """(measured numbers for ``plan``, where each came from) for this machine as one node, from
    the result files in ``folder``, measured now, or assumed.

    ``gpus_per_node`` counts **physical** GPUs: the ``replicas`` model replicas share them
    (``num_gpus`` = GPUs / replicas each), so two replicas on one GPU are one GPU's rate, not two.
    Without a GPU it is 1: the CPU, all its cores, is the one device the model's rate was
    measured on, and the replicas are logical GPUs sharing it. ``gpu_failure_detect_s`` and
    ``replacement`` (stated inputs for :func:`replacement_s`, or None for a spare GPU already in
    the cluster) state the failure case the uptime counts (:func:`failure_cost`).
    Extra keys a plan does not read: ``scaling`` (the measured sides and fits),
    ``in_machine_copy_bytes_per_s``, ``host_to_device`` and ``gpu_memory`` (:func:`host_to_device`,
    :func:`gpu_memory`)."""
    found = results.load_all(folder)
    lab1, lab2, lab3 = found.get("01_actor_scaling", {}), found.get("02_restart_recovery", {}), found.get("03_quotas", {})
    m, notes = {}, []

    def take(key, value, where):
        m[key] = value
        notes.append(f"{key}: {value:,.6g} ({where})" if isinstance(value, (int, float)) else f"{key}: ({where})")

    take("base_px", BASE_PX, "the side the per-batch rates below are measured at")
    take("kernel_images_per_s", model_rates(), f"measured now: the network ({convnet.flops() / 1e6:.1f} MFLOP "
         f"per {BASE_PX}x{BASE_PX} image) on {backend.name()}, batch sizes {', '.join(map(str, batches()))}")
    model = model_scaling()
    take("model_fixed_fraction", fixed_fraction(*model["fit"]),
         f"measured now: the network at sides {', '.join(map(str, model['seconds_per_image']))}, fitted a + b*px²")
    cpu = decode_scaling()
    a, b = cpu["fit"]
    take("cpu_images_per_s", 1 / (a + b * BASE_PX ** 2), f"measured now: JPEG decode + resize on one core, "
         f"from the fit over sides {', '.join(map(str, cpu['seconds_per_image']))}")
    take("cpu_fixed_fraction", fixed_fraction(a, b), "the same fit")
    ja, jb = cpu["jpeg_fit"]
    take("jpeg_bytes_fixed", ja, f"measured now: generated JPEGs (quality {pipeline.JPEG_QUALITY}), fitted a + b*px²")
    take("jpeg_bytes_per_pixel", jb, "the same fit")
    m["scaling"] = {"model": model, "cpu": cpu}
    overhead = lab1.get("call_overhead_s") or lab1.get("call_p50_s")
    take("call_overhead_s", float(overhead) if overhead else call_overhead(),
         "lab 01" if overhead else "measured now: median blocking call to a trivial actor")
    restart = lab2.get("restart_p50_s")
    replace_s, replace_why = replacement_s(**replacement) if replacement else (0.0, None)
    cost, why = failure_cost(node_detection(), float(restart) if restart else restart_time(),
                             "lab 02, p50: a killed actor's process found dead and restarted on a live node"
                             if restart else "measured now: one actor restart on a live node (lab 02's measurement)",
                             gpu_failure_detect_s=gpu_failure_detect_s, replace_s=replace_s, replace_why=replace_why)
    take("restart_s", cost["restart_s"], why[1])
    take("detect_s", cost["detect_s"], why[0])
    share = (lab3.get("tenant_share") or {}).get("a")
    take("quota_share", float(share) if share else 1.0,
         "lab 03: tenant a's share of the pool" if share else "the whole machine: lab 03's file lacks a share")
    take("link_bytes_per_s", link_gbit_s * 1e9 / 8, f"an assumption, not measured: a {link_gbit_s:g} Gbit/s "
         f"link per node (try {' / '.join(map(str, LINK_GBIT_S))})")
    take("failures_per_gpu_hour", failures_per_gpu_hour, "an assumption, not measured: change it")
    gpus = physical_gpus()
    take("gpus_per_node", gpus or 1, f"this machine: {gpus} physical GPU(s), shared by the {int(replicas)} model "
         "replicas" if gpus else f"this machine has no GPU: the CPU (all its cores) is the one device the model's "
         f"rate was measured on; the {int(replicas)} replicas are logical GPUs sharing it")
    take("gpus_per_failure", m["gpus_per_node"] if gpu_failure_detect_s is None else 1,
         "a lost node takes all its GPUs down, so each failure charges gpus_per_node x (detect_s + restart_s)"
         if gpu_failure_detect_s is None else "a GPU failing while its raylet lives takes only itself down")
    take("cpus_per_node", int(os.cpu_count() or 1), "this machine's cores")
    take("max_actors_per_gpu", MAX_ACTORS_PER_GPU, "the model's cap")
    link = (found.get("04_data_affinity") or {}).get("link_bytes_per_s")
    m["in_machine_copy_bytes_per_s"] = float(link) if link else copy_rate()
    notes.append(f"in_machine_copy_bytes_per_s: {m['in_machine_copy_bytes_per_s']:,.6g} (not used by plan: "
                 + ("lab 04's ray.get between emulated nodes" if link else "ray.get on this machine")
                 + ", a copy in shared memory, not a network)")
    batch = max(m["kernel_images_per_s"], key=lambda b: m["kernel_images_per_s"][b])
    for key, got in (("host_to_device", host_to_device(int(batch))), ("gpu_memory", gpu_memory(int(batch)))):
        m[key] = got
        notes.append(f"{key}: (not used by plan: {got['note']})")
    return m, notes
