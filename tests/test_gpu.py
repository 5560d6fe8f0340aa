"""The GPU path on a real device: ``scripts/gpu_check.sh`` runs these (``pytest -m gpu``).

Skipped where no CUDA device is visible (tests/conftest.py). Written for the lent machine
described in ../shared/gpu.md: Python with NumPy and CuPy, no Ray and no nbgrader, so the
kernel, model and measurement checks need neither, and the Ray and grading checks skip with a
reason where those are missing. Every figure is written to ``$GPU_CHECK_OUT/gpu-check.json``
(default ``build/gpu-check``) for docs/learners/cpu-gpu.md's results table.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from course import backend, bench, convnet, kernels

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.gpu
LABS = ("00_measure", "01_actor_scaling", "02_restart_recovery", "03_quotas", "04_data_affinity", "05_capstone")

# Datasheet memory bandwidth, GB/s, by a substring of the CUDA device name: NVIDIA's product
# datasheets (H200: 4.8 TB/s HBM3e; H100 SXM5 80 GB HBM3: 3.35 TB/s; H100 PCIe: 2 TB/s; T4: 320 GB/s).
DATASHEET_GBPS = {"H200": 4800.0, "H100 80GB HBM3": 3350.0, "H100 PCIe": 2000.0, "T4": 320.0}

# The model's logits against convnet.reference (NumPy, float32). Default CuPy matmuls are full
# FP32 (CuPy uses TF32 only with CUPY_TF32=1), so they differ from NumPy's only by summation order
# (cuBLAS and CuPy's reductions against OpenBLAS and NumPy's pairwise sums). Measured on the host,
# float32 against float64 differs by 4.6e-7 at logits up to 0.39 (1.2e-6 of the largest): FP32_TOL
# leaves about 15x that. TF32 rounds every input of a product to 10 mantissa bits (unit roundoff
# 2^-11, about 4.9e-4), so its tolerance is set 1000x wider; the figure measured is recorded.
FP32_TOL = 2e-5   # of max |reference logit|
TF32_TOL = 2e-2


@pytest.fixture(scope="module")
def cp():
    """CuPy, with the kit's backend on it (COURSE_BACKEND=numpy would make these meaningless)."""
    import cupy

    assert backend.name() == "cupy", f"backend is {backend.name()}: unset COURSE_BACKEND"
    return cupy


@pytest.fixture(scope="module")
def record():
    """Figures to keep: written to $GPU_CHECK_OUT/gpu-check.json once the module's tests end."""
    figures: dict = {}
    yield figures
    out = Path(os.environ.get("GPU_CHECK_OUT") or ROOT / "build" / "gpu-check")
    out.mkdir(parents=True, exist_ok=True)
    path = out / "gpu-check.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**old, **figures}, indent=2, default=str) + "\n")


def test_device_facts(cp, record):
    f = backend.facts()
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    assert f.backend == "cupy" and f.device != "cpu" and f.memory_gib > 1
    record.update(date=datetime.date.today().isoformat(), device=f.device, memory_gib=round(f.memory_gib, 1),
                  compute_capability=f"{props['major']}.{props['minor']}", cupy=cp.__version__,
                  cuda_runtime=cp.cuda.runtime.runtimeGetVersion(), cuda_driver=cp.cuda.runtime.driverGetVersion(),
                  fingerprint=backend.fingerprint(), python=sys.version.split()[0])


@pytest.mark.parametrize("shape", [(64, 64, 64), (1, 1, 1), (3, 5, 9), (257, 33, 17), (4096, 64, 64)])
def test_blur_kernel_agrees_with_numpy_exactly(cp, shape):
    """The CUDA kernel and NumPy round once, the same way: equal bit for bit, at a lab's size,
    at sizes that leave a partial block, and at a large batch."""
    host = np.random.default_rng(sum(shape)).integers(0, 256, size=shape, dtype=np.uint8)
    gpu = kernels.blur_cupy(cp.asarray(host))
    assert isinstance(gpu, cp.ndarray) and gpu.dtype == cp.float32
    assert np.array_equal(cp.asnumpy(gpu), kernels.blur_numpy(host))


def test_process_on_the_device_matches_the_reference_checksum(cp):
    batch = kernels.make_batch(256, seed=7)
    assert isinstance(batch, cp.ndarray)
    result = kernels.process(batch)
    backend.sync()
    assert isinstance(result, cp.ndarray)
    assert kernels.matches(result, kernels.reference_checksum(256, seed=7))
    assert isinstance(backend.to_host(result), np.ndarray)


def _logit_gap(logits, ref) -> float:
    """Largest |difference| as a fraction of the largest |reference logit|."""
    return float(np.max(np.abs(np.asarray(logits) - ref)) / np.max(np.abs(ref)))


def _images(n: int = 8) -> np.ndarray:
    return np.random.default_rng(5).integers(0, 256, (n, convnet.INPUT_PX, convnet.INPUT_PX, 3), dtype=np.uint8)


def test_model_logits_agree_with_the_reference_in_fp32(cp, record):
    images = _images()
    logits = convnet.Network()(images)
    assert isinstance(logits, np.ndarray) and logits.dtype == np.float32  # host arrays reach Ray Data
    gap = _logit_gap(logits, convnet.reference(images))
    record["convnet_fp32_gap"] = gap
    assert gap <= FP32_TOL, f"logits differ by {gap:.2e} of the largest (tolerance {FP32_TOL:.0e})"


def test_model_logits_with_tf32_stay_within_the_tf32_tolerance(cp, record):
    """CUPY_TF32=1 lets cuBLAS use TF32 tensor cores (read when CuPy starts: a fresh process)."""
    code = ("import numpy as np, sys; sys.path.insert(0, 'tests'); import test_gpu as t; "
            "from course import convnet; i = t._images(); print(t._logit_gap(convnet.Network()(i), convnet.reference(i)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "CUPY_TF32": "1", "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    gap = float(out.stdout.split()[-1])
    record["convnet_tf32_gap"] = gap
    assert gap <= TF32_TOL


def test_the_model_stage_hands_ray_data_host_arrays(cp):
    from course import pipeline

    out = pipeline.Model()({"id": np.arange(2), "image": _images(2)})
    assert isinstance(out["value"], np.ndarray) and out["value"].shape == (2, convnet.CLASSES)


def _reported_peak_gbps(cp) -> float:
    """Peak memory bandwidth the device reports: memory clock (kHz) x bus width (bits) x 2 (DDR) / 8.

    Read as device attributes (cudaDevAttrMemoryClockRate = 36, cudaDevAttrGlobalMemoryBusWidth = 37
    in the CUDA Runtime API's cudaDeviceAttr): CUDA 13 dropped memoryClockRate from cudaDeviceProp.
    """
    dev = cp.cuda.Device().id
    khz = cp.cuda.runtime.deviceGetAttribute(36, dev)
    bits = cp.cuda.runtime.deviceGetAttribute(37, dev)
    return khz * 1e3 * bits * 2 / 8 / 1e9


def _datasheet_gbps(device: str) -> float | None:
    return next((v for k, v in DATASHEET_GBPS.items() if k in device), None)


def test_lab00_roofline_against_the_datasheet(cp, record):
    """Lab 00's figure (its last exercise: the best of batch sizes 1..256, 512 images a call set,
    bytes_touched/s), and the same kernel at a batch large enough to stream, against the device's
    bandwidth. Above the peak would mean the clock stopped before the work did (no sync)."""
    rates = {}
    for n in (1, 4, 16, 64, 256):
        batch, reps = kernels.make_batch(n, seed=n), max(1, 512 // n)
        rates[n] = bench.measure(lambda b=batch, r=reps: [kernels.process(b) for _ in range(r)],
                                 items=n * reps, budget_s=2.0).rate
    best = max(rates, key=rates.get)
    lab00 = kernels.bytes_touched(rates[best]) / 1e9
    big = kernels.make_batch(65536, seed=1)
    m = bench.measure(lambda: kernels.process(big), items=len(big), budget_s=3.0)
    streaming = kernels.bytes_touched(m.rate) / 1e9
    peak, sheet = _reported_peak_gbps(cp), _datasheet_gbps(backend.facts().device)
    record.update(lab00_best_batch=best, lab00_images_per_s=rates[best], lab00_gbps=lab00,
                  batch65536_images_per_s=m.rate, batch65536_gbps=streaming, batch65536_spread=m.spread,
                  reported_peak_gbps=peak, datasheet_gbps=sheet)
    ceiling = min(v for v in (peak, sheet) if v)
    assert 0 < lab00 <= ceiling * 1.05 and 0 < streaming <= ceiling * 1.05, record


def test_synchronising_is_what_makes_the_time_the_kernels(cp, record):
    big = kernels.make_batch(65536, seed=2)
    kernels.process(big)
    backend.sync()
    launch = bench.time_call(lambda: kernels.process(big), sync=False)
    backend.sync()
    full = bench.time_call(lambda: kernels.process(big))
    record.update(launch_only_ms=launch * 1e3, synchronised_ms=full * 1e3)
    assert full > launch


# -- Ray on the GPU (skipped where Ray is not installed) ----------------------------------

@pytest.fixture(scope="module")
def ray_gpu(cp):
    """The kit's quiet local Ray, with the real GPU(s) it detects."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed here (../shared/gpu.md: carry its wheel to check Ray on the GPU)")
    import ray

    from course import cluster

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/
    info = cluster.start(num_cpus=4)
    assert ray.cluster_resources().get("GPU", 0) >= 1, ray.cluster_resources()
    yield ray
    del info
    cluster.stop()


class _Worker:
    """What a lab's GPU actor does: the kernel on its device, a host result back."""

    def run(self, seed: int):
        import ray as _ray

        from course import backend as b, kernels as k

        out = k.process(k.make_batch(64, seed=seed))
        return b.name(), _ray.get_gpu_ids(), k.checksum(out), os.environ.get("CUDA_VISIBLE_DEVICES")


def test_ray_actor_with_one_gpu_runs_the_kernel_on_it(ray_gpu, record):
    actor = ray_gpu.remote(num_gpus=1, num_cpus=0)(_Worker).remote()
    name, ids, checksum, visible = ray_gpu.get(actor.run.remote(3), timeout=120)
    record.update(ray_actor_gpu_ids=[str(i) for i in ids], ray_actor_cuda_visible_devices=visible)
    assert name == "cupy" and len(ids) == 1 and visible is not None
    assert np.isclose(checksum, kernels.reference_checksum(64, seed=3), rtol=1e-5)
    ray_gpu.kill(actor)


def test_ray_fractional_gpus_fit_lab05s_pool(ray_gpu):
    """Lab 05's pool asks num_gpus = 1/actors each (pipeline.actor_options): all fit on one GPU,
    and one more does not."""
    from course import pipeline

    gpus = int(ray_gpu.cluster_resources()["GPU"])
    opts = pipeline.actor_options(4 * gpus)
    assert opts["num_gpus"] == 0.25
    pool = [ray_gpu.remote(_Worker).options(**opts).remote() for _ in range(4 * gpus)]
    ready, pending = ray_gpu.wait([a.run.remote(i) for i, a in enumerate(pool)], num_returns=len(pool), timeout=120)
    assert not pending and all(ray_gpu.get(r)[0] == "cupy" for r in ready)
    extra = ray_gpu.remote(_Worker).options(**opts).remote()
    _, waiting = ray_gpu.wait([extra.run.remote(0)], timeout=3)
    assert waiting, "a fifth quarter-GPU actor started: fractional GPUs are not being accounted"
    for a in pool + [extra]:
        ray_gpu.kill(a)


def test_ray_max_calls_for_gpu_tasks(ray_gpu, record):
    """tenancy.py's tasks set max_calls=0 so a GPU task's worker is reused; max_calls=1 gives a
    fresh process each call. Both observed by the worker's PID."""
    pid = ray_gpu.remote(num_gpus=1, num_cpus=0)(os.getpid)
    reused = [ray_gpu.get(pid.options(max_calls=0).remote(), timeout=120) for _ in range(3)]
    fresh = [ray_gpu.get(pid.options(max_calls=1).remote(), timeout=120) for _ in range(3)]
    default = [ray_gpu.get(pid.remote(), timeout=120) for _ in range(3)]
    record.update(ray_max_calls0_distinct_pids=len(set(reused)), ray_max_calls1_distinct_pids=len(set(fresh)),
                  ray_default_gpu_task_distinct_pids=len(set(default)))
    assert len(set(reused)) == 1 and len(set(fresh)) == 3


# -- grading on the GPU (skipped where Ray or nbgrader is missing) -------------------------

def _need_grading_tools():
    missing = [m for m in ("ray", "nbgrader", "nbclient") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed here: grading on the GPU needs them")


def _check(notebook: Path) -> dict:
    """``python -m autograder check NOTEBOOK --json`` (unsandboxed where bubblewrap is missing)."""
    cmd = [sys.executable, "-m", "autograder", "check", str(notebook), "--json"]
    if shutil.which("bwrap") is None:
        cmd.append("--unsandboxed")
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=1800)
    assert out.stdout.strip(), out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.grading
@pytest.mark.parametrize("lab", LABS)
def test_solution_full_marks_and_blank_zero_on_the_gpu(cp, lab, record):
    _need_grading_tools()
    started = time.monotonic()
    solved = _check(ROOT / "solutions" / lab / f"{lab}.ipynb")
    blank = _check(ROOT / "labs" / lab / f"{lab}.ipynb")
    record[f"grade_{lab}"] = {"solution": f"{solved['score']:g}/{solved['max_score']:g}",
                              "blank": f"{blank['score']:g}/{blank['max_score']:g}",
                              "seconds": round(time.monotonic() - started)}
    assert solved["score"] == solved["max_score"] and blank["score"] == 0, record[f"grade_{lab}"]


@pytest.mark.grading
def test_calibrate_separates_every_tier_on_the_gpu(cp, record):
    _need_grading_tools()
    out = subprocess.run([sys.executable, "-m", "autograder", "calibrate", "--json"], capture_output=True,
                         text=True, cwd=ROOT, timeout=3600)
    rows = json.loads(out.stdout)
    record["calibrate"] = rows
    assert out.returncode == 0, out.stderr[-3000:]
