"""Which array library runs the course's kernels: CuPy on a GPU, NumPy everywhere else.

The choice is made once per process. ``COURSE_BACKEND=numpy|cupy`` forces it; otherwise CuPy
is used when ``cupy.cuda.is_available()`` is true and at least one device is visible. Without
a driver ``import cupy`` succeeds but the first allocation fails, so importability alone is
never the test (see the design's pitfalls). On Linux the driver is looked for first
(:func:`driver_status`), so a machine with CuPy installed and no driver -- CI, a laptop -- never
pays for importing CuPy (0.15-0.45 s per process measured on a 2-core machine, in every Ray
worker that runs a kernel) and stays on the NumPy path exactly as without CuPy.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import os
import platform
from dataclasses import dataclass
from typing import Callable

ENV_VAR = "COURSE_BACKEND"
CHOICES = ("numpy", "cupy")


class BackendError(RuntimeError):
    """The requested backend cannot run on this machine."""


# The CUDA driver's user-space library on Linux, which CuPy loads to reach a device (NVIDIA's
# CUDA Installation Guide for Linux and Driver API docs name it libcuda.so; .1 is its soname).
DRIVER_LIBRARY = "libcuda.so.1"


def driver_status() -> tuple[bool, str]:
    """(maybe, why): whether a CUDA driver could be there, found without importing CuPy.

    On Linux, a driver that ``dlopen`` cannot load means no device can be reached, whatever
    CuPy would say; elsewhere (no such cheap test) the answer is "maybe" and CuPy decides.
    """
    if platform.system() != "Linux":
        return True, "not Linux: CuPy decides"
    try:
        ctypes.CDLL(DRIVER_LIBRARY)
    except OSError as exc:
        return False, f"no CUDA driver ({exc})"
    return True, f"{DRIVER_LIBRARY} loads"


@functools.lru_cache(maxsize=None)
def gpu_status() -> tuple[bool, str]:
    """(usable, why): whether CuPy can run kernels here, and a one-line reason.

    CuPy is imported only where it is installed and a driver may be there (:func:`driver_status`).
    """
    try:
        installed = importlib.util.find_spec("cupy") is not None
    except (ImportError, ValueError) as exc:
        return False, f"cupy is not importable ({type(exc).__name__}: {exc})"
    if not installed:
        return False, "cupy is not installed (pip install -e \".[gpu]\")"
    driver, why = driver_status()
    if not driver:
        return False, f"cupy is installed but {why}"
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA install raising on import
        return False, f"cupy is not importable ({type(exc).__name__}: {exc})"
    try:
        if not cupy.cuda.is_available():
            return False, "cupy is installed but no CUDA driver/device is available"
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return False, f"cupy cannot query devices ({type(exc).__name__}: {exc})"
    if count < 1:
        return False, "no CUDA device is visible"
    return True, f"{count} CUDA device(s) visible"


@functools.lru_cache(maxsize=None)
def name() -> str:
    """The backend in use: ``"cupy"`` or ``"numpy"``."""
    forced = os.environ.get(ENV_VAR, "").strip().lower()
    if forced and forced not in CHOICES:
        raise BackendError(f"{ENV_VAR}={forced!r}: choose one of {', '.join(CHOICES)}")
    usable, why = gpu_status()
    if forced == "cupy" and not usable:
        raise BackendError(f"{ENV_VAR}=cupy, but {why}. Unset it to run on NumPy.")
    if forced == "numpy":
        return "numpy"
    return "cupy" if usable else "numpy"


def xp():
    """The array module of the backend (``cupy`` or ``numpy``)."""
    if name() == "cupy":
        import cupy

        return cupy
    import numpy

    return numpy


def on_gpu() -> bool:
    """True when kernels run on a CUDA device."""
    return name() == "cupy"


# Work launched but not yet finished. On a GPU that is the CUDA stream; on a CPU there is
# nothing asynchronous, so lessons and the grader may *emulate* an asynchronous launch by
# deferring a callable here: it runs when `sync()` is called, as queued GPU work would.
_deferred: list[Callable[[], object]] = []


def defer(work: Callable[[], object]) -> None:
    """Queue ``work`` to run at the next :func:`sync` (an emulated asynchronous launch)."""
    _deferred.append(work)


def sync() -> None:
    """Block until all launched work has finished: the device and any deferred work.

    GPU kernels launch asynchronously; a clock stopped before ``sync()`` measures the
    launch, not the work.
    """
    while _deferred:
        _deferred.pop(0)()
    if on_gpu():
        import cupy

        cupy.cuda.Device().synchronize()


def to_device(array):
    """Copy a NumPy array to the backend's device (a no-op on NumPy)."""
    return xp().asarray(array)


def to_host(array):
    """Copy a backend array to a NumPy array (a no-op on NumPy)."""
    if on_gpu():
        import cupy

        return cupy.asnumpy(array)
    return array


@dataclass(frozen=True)
class DeviceFacts:
    """What the kernels run on, as shown at the top of every lab."""

    backend: str
    device: str
    memory_gib: float
    cpu: str
    cores: int
    why: str

    def __str__(self) -> str:
        return (
            f"backend={self.backend} device={self.device} memory={self.memory_gib:.1f} GiB "
            f"cpu={self.cpu} cores={self.cores}"
        )


def _cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what `platform` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _host_memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return 0.0


@functools.lru_cache(maxsize=None)
def facts() -> DeviceFacts:
    """The backend, device name and memory, CPU model and core count."""
    cores = os.cpu_count() or 1
    usable, why = gpu_status()
    if on_gpu():
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        device = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        memory = props["totalGlobalMem"] / 2**30
    else:
        device, memory = "cpu", _host_memory_gib()
    return DeviceFacts(name(), device, memory, _cpu_model(), cores, why)


def fingerprint() -> str:
    """A short, stable string naming this hardware, e.g. ``numpy-cpu-2c-1a2b3c``.

    Saved next to every measurement so that numbers from different machines are never
    compared as if they came from one.
    """
    f = facts()
    digest = hashlib.sha1(f"{f.device}|{f.memory_gib:.0f}|{f.cpu}|{f.cores}".encode()).hexdigest()
    device = "cpu" if f.device == "cpu" else f.device.split()[-1].lower()
    return f"{f.backend}-{device}-{f.cores}c-{digest[:6]}"
