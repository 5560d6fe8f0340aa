"""The CuPy branches, exercised as far as a machine with CuPy installed and no CUDA driver allows.

What runs here for real: the backend's choice (CuPy installed, no driver), the kernel object
CuPy builds from the kit's source, the launch and argument types blur_cupy uses, and the Ray
resources the kit asks for on a GPU, given the device count a GPU machine would report. What
cannot run without a device -- any CuPy allocation, the kernel itself, cuBLAS in the network,
synchronisation, device facts -- is only checked for its API surface here (every CuPy name and
keyword the CuPy branch calls exists in the installed CuPy) and runs in ``tests/test_gpu.py`` on a
device (``scripts/gpu_check.sh``); docs/learners/cpu-gpu.md lists it.
"""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

from course import backend, convnet, kernels

ROOT = Path(__file__).resolve().parents[1]
cupy = pytest.importorskip("cupy", reason="cupy is not installed (pip install -e \".[nvrtc]\")")


@pytest.fixture
def no_device():
    """This machine as CI has it: CuPy installed, no CUDA device. Caches cleared around the test."""
    if backend.gpu_status()[0]:
        pytest.skip("a CUDA device is visible here: tests/test_gpu.py covers this machine")
    for f in (backend.gpu_status, backend.name, backend.facts):
        f.cache_clear()
    yield
    for f in (backend.gpu_status, backend.name, backend.facts):
        f.cache_clear()


# -- the backend's choice -----------------------------------------------------------------

def test_cupy_installed_without_a_driver_chooses_numpy_and_says_why(no_device, monkeypatch):
    monkeypatch.delenv("COURSE_BACKEND", raising=False)
    usable, why = backend.gpu_status()
    assert not usable and why.startswith("cupy is installed but"), why
    assert backend.name() == "numpy" and backend.xp() is np and not backend.on_gpu()
    assert backend.facts().device == "cpu"


def test_where_a_driver_library_loads_cupy_itself_decides(no_device, monkeypatch):
    """Past the driver probe (as on a machine with a driver and no device), CuPy is imported and
    ``cupy.cuda.is_available()`` answers."""
    monkeypatch.setattr(backend, "driver_status", lambda: (True, "pretend libcuda.so.1 loads"))
    usable, why = backend.gpu_status()
    assert not usable, why
    assert why == "cupy is installed but no CUDA driver/device is available" or why.startswith("cupy cannot query"), why


def test_forcing_cupy_without_a_device_names_the_reason(no_device, monkeypatch):
    monkeypatch.setenv("COURSE_BACKEND", "cupy")
    with pytest.raises(backend.BackendError, match=r"COURSE_BACKEND=cupy, but cupy is installed but"):
        backend.name()


def test_the_numpy_path_never_imports_cupy_where_no_driver_loads():
    """The CPU path with CuPy installed: the image kernel, the network and a measurement run, and
    ``cupy`` is never imported (its import costs 0.15-0.45 s a process here)."""
    code = textwrap.dedent("""
        import sys
        from course import backend, bench, convnet, kernels
        out = kernels.process(kernels.make_batch(8, seed=1))
        assert kernels.matches(out, kernels.reference_checksum(8, seed=1))
        logits = convnet.Network()(kernels.np.zeros((1, 32, 32, 3), dtype="uint8"))
        assert logits.shape == (1, convnet.CLASSES)
        bench.measure(lambda: kernels.process(kernels.make_batch(2)), min_repeats=2, budget_s=0.1)
        print(backend.name(), "cupy" in sys.modules)
    """)
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    if backend.driver_status()[0]:
        pytest.skip("a CUDA driver library loads here")
    assert out.stdout.split() == ["numpy", "False"]


# -- the kernel object and its launch -----------------------------------------------------

def test_cupy_builds_the_kernel_object_from_the_kit_source(monkeypatch):
    """RawKernel compiles lazily, at the first launch (on a device); its source and name are set here."""
    monkeypatch.setattr(kernels, "_compiled", None)
    k = kernels._kernel()
    assert isinstance(k, cupy.RawKernel)
    assert k.name == kernels.KERNEL_NAME and k.code == kernels.BLUR_SOURCE


def test_the_launch_covers_every_pixel_once_with_at_most_one_partial_block():
    for n, h, w in ((1, 1, 1), (3, 64, 64), (7, 5, 9), (256, 64, 64)):
        (blocks,), (threads,), shared = kernels.launch_config(n, h, w)
        assert threads == kernels.THREADS_PER_BLOCK and shared == kernels.SHARED_MEMORY_BYTES == 0
        assert (blocks - 1) * threads < n * h * w <= blocks * threads


def test_scalar_arguments_have_the_c_signatures_widths():
    n, h, w, scale = kernels.scalar_args(3, 64, 32)
    assert [type(v) for v in (n, h, w, scale)] == [np.int32, np.int32, np.int32, np.float32]
    assert (int(n), int(h), int(w)) == (3, 64, 32) and scale == kernels.SCALE


# -- the API surface the CuPy branch calls ------------------------------------------------

# Functions that run on the CuPy branch, and whether their method calls are on CuPy arrays.
CUPY_BRANCH = {
    "course.backend": {"gpu_status": False, "sync": False, "to_host": False, "facts": False, "xp": False},
    "course.kernels": {"_kernel": False, "blur_cupy": False, "process": True},
    "course.convnet": {"_conv3x3": True, "_pool2": True, "forward": True},
    "course.fleet": {"real_devices": False},
}
_NOT_ARRAY_METHODS = {"decode"}  # props["name"].decode(): bytes, not an array


def _resolve(node, scope: dict):
    """The CuPy object an expression like ``cupy.cuda.Device()`` or ``xp.pad`` names, else None."""
    if isinstance(node, ast.Name):
        return scope.get(node.id)
    if isinstance(node, ast.Call):  # a class called gives an instance; a CuPy function, an array
        target = _resolve(node.func, scope)
        return target if target is None or inspect.isclass(target) else cupy.ndarray
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, scope)
        if base is None:
            return None
        if not hasattr(base, node.attr):
            raise AssertionError(f"{ast.unparse(node)}: the installed CuPy has no {node.attr!r}")
        return getattr(base, node.attr)
    return None


def _accepts(fn, keyword: str) -> bool:
    """Whether ``fn`` takes ``keyword``: its signature, or the signature Cython writes at the top
    of its docstring."""
    try:
        params = inspect.signature(fn).parameters
        return keyword in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    except (TypeError, ValueError):
        head = (fn.__doc__ or "")[:400]
        return re.search(rf"\b{re.escape(keyword)}\s*=", head) is not None


def _names_a_module(node, module: str) -> bool:
    """Whether ``node`` is a name ``module`` binds to a module (``np``, ``backend``): not an array."""
    mod = __import__(module, fromlist=["_"])
    return isinstance(node, ast.Name) and isinstance(getattr(mod, node.id, None), types.ModuleType)


def _calls(module: str, function: str):
    """The Call nodes of ``module.function``'s source."""
    mod = __import__(module, fromlist=["_"])
    tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(mod, function))))
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


@pytest.mark.parametrize("module,function", [(m, f) for m, fs in CUPY_BRANCH.items() for f in fs])
def test_every_cupy_name_and_keyword_on_the_cupy_branch_exists(module, function):
    """Not a run: a CuPy call NumPy accepts and CuPy does not (a missing function, method or
    keyword) is caught here; what the call computes is checked on a device (tests/test_gpu.py)."""
    if module == "course.fleet":
        pytest.importorskip("ray", reason="course.fleet imports Ray")
    scope = {"cupy": cupy, "xp": cupy, "_kernel": cupy.RawKernel}  # _kernel() builds a RawKernel
    on_arrays = CUPY_BRANCH[module][function]
    checked = 0
    for call in _calls(module, function):
        target = _resolve(call.func, scope)
        if target is None and on_arrays and isinstance(call.func, ast.Attribute) \
                and call.func.attr not in _NOT_ARRAY_METHODS and not _names_a_module(call.func.value, module):
            if not hasattr(cupy.ndarray, call.func.attr):
                raise AssertionError(f"{ast.unparse(call)}: cupy.ndarray has no {call.func.attr!r}")
            target = getattr(cupy.ndarray, call.func.attr)
        if target is None:
            continue
        if isinstance(call.func, ast.Call) and inspect.isclass(target):  # _kernel()(...): a launch
            target = target.__call__
        for kw in call.keywords:
            if kw.arg is not None:
                assert _accepts(target, kw.arg), f"{ast.unparse(call)}: CuPy's {target} takes no {kw.arg}="
        checked += 1
    assert checked or function == "xp", f"{module}.{function}: no CuPy call found: the scan is broken"


def test_the_surface_check_catches_a_call_cupy_lacks():
    scope = {"cupy": cupy, "xp": cupy}
    with pytest.raises(AssertionError, match="no 'busday_count'"):  # NumPy has it
        _resolve(ast.parse("xp.busday_count(a, b)").body[0].value.func, scope)
    assert not _accepts(cupy.ascontiguousarray, "like")


def test_the_kernel_launch_keyword_is_one_rawkernel_takes():
    assert _accepts(cupy.RawKernel.__call__, "shared_mem")


# -- what the kit asks Ray for on a GPU ---------------------------------------------------

@pytest.fixture
def as_on_one_gpu(monkeypatch):
    """The GPU branch's resource logic, with the device count a one-GPU machine reports (no GPU
    work is done or pretended: these functions only build Ray options)."""
    pytest.importorskip("ray", reason="course.fleet imports Ray")
    from course import fleet

    monkeypatch.setattr(backend, "on_gpu", lambda: True)
    monkeypatch.setattr(fleet, "real_devices", lambda: 1)
    return fleet


def test_ray_options_on_one_gpu(as_on_one_gpu):
    from course import pipeline

    fleet = as_on_one_gpu
    assert fleet.device_options() == {"num_cpus": 0, "num_gpus": 1}
    assert fleet.device_options(reserve=False)["num_gpus"] == 0.01
    assert fleet.emulated_options() == {"num_cpus": 0, "num_gpus": 0, "resources": {fleet.EMULATED_RESOURCE: 1}}
    # lab 05's pool: four replicas share the one GPU, a quarter each; one replica takes it whole
    assert pipeline.actor_options(4) == {"num_gpus": 0.25, "num_cpus": 0}
    assert pipeline.actor_options(1) == {"num_gpus": 1.0, "num_cpus": 0}


def test_convnet_picks_the_array_module_of_its_input():
    """NumPy input stays on NumPy whatever the backend; anything else goes to the backend's module."""
    assert convnet._xp(np.zeros(1)) is np
