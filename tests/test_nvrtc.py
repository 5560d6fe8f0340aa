"""Every CUDA source the kit ships compiles with NVRTC for the GPUs learners meet, and launches
within each one's limits -- checked on a machine without a GPU (the default CI).

NVRTC comes with the ``nvrtc`` extra (``cupy-cuda12x`` and ``nvidia-cuda-nvrtc-cu12`` from PyPI),
which the ``test`` extra installs. Where it is missing these tests skip, unless
``COURSE_KIT_REQUIRE_NVRTC=1`` (CI sets it) makes that a failure.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import numpy as np
import pytest

import cuda_arch
from course import kernels
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def nvrtc_available():
    """Skip (or fail, under COURSE_KIT_REQUIRE_NVRTC=1) where NVRTC cannot be loaded."""
    try:
        cuda_arch.nvrtc().getVersion()
    except Exception as exc:  # ImportError without cupy; a RuntimeError/OSError without libnvrtc
        why = f"NVRTC is not available ({type(exc).__name__}: {exc}); pip install -e \".[nvrtc]\""
        if os.environ.get("COURSE_KIT_REQUIRE_NVRTC") == "1":
            pytest.fail(why)
        pytest.skip(why)


KERNELS = sorted(kernels.CUDA_SOURCES)
ARCHS = {a.cc: a for a in cuda_arch.ARCHS}
PTX_TYPES = {np.int32: "u32", np.uint32: "u32", np.int64: "u64", np.float32: "f32", np.float64: "f64"}


def _shipped_cuda_sources() -> list[tuple[str, str]]:
    """(file, source) of every string in the kit's code and notebooks that defines a CUDA kernel."""
    found = []
    for folder in ("course", "autograder"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and "__global__" in node.value:
                    found.append((str(path.relative_to(ROOT)), node.value))
    for folder in ("solutions", "labs"):
        for path in sorted((ROOT / folder).glob("*/*.ipynb")):
            for cell in json.loads(path.read_text())["cells"]:
                if cell["cell_type"] == "code" and "__global__" in "".join(cell["source"]):
                    found.append((str(path.relative_to(ROOT)), "".join(cell["source"])))
    return found


def test_every_shipped_cuda_source_is_registered_for_these_checks():
    """A kernel added anywhere in the kit is compiled here only if it is in kernels.CUDA_SOURCES."""
    shipped = _shipped_cuda_sources()
    assert shipped, "found no CUDA source: the scan is broken"
    registered = set(kernels.CUDA_SOURCES.values())
    missing = [where for where, src in shipped if src not in registered]
    assert not missing, f"CUDA source(s) not in course.kernels.CUDA_SOURCES: {missing}"


def test_nvrtc_targets_every_architecture_learners_meet():
    supported = set(cuda_arch.nvrtc().getSupportedArchs())
    assert set(ARCHS) <= supported, f"this NVRTC ({cuda_arch.nvrtc().getVersion()}) lacks {set(ARCHS) - supported}"


@pytest.mark.parametrize("cc", sorted(ARCHS))
@pytest.mark.parametrize("kernel", KERNELS)
def test_source_compiles_to_ptx_with_the_signature_blur_cupy_launches(kernel, cc):
    """PTX for ``compute_XY`` has the kernel's entry, and its parameters are the types of the
    arguments blur_cupy passes (two device pointers, then the scalars of kernels.scalar_args)."""
    text = cuda_arch.ptx(kernels.CUDA_SOURCES[kernel], cc)
    assert f".target sm_{cc}" in text
    want = ["u64", "u64"] + [PTX_TYPES[type(a)] for a in kernels.scalar_args(2, 64, 64)]
    assert cuda_arch.entry_params(text, kernel) == want


@pytest.mark.parametrize("cc", sorted(ARCHS))
@pytest.mark.parametrize("kernel", KERNELS)
def test_launch_configuration_fits_the_architecture(kernel, cc):
    """blur_cupy's launch (threads per block, shared memory, registers ptxas allots, grid size)
    fits each architecture, for a lab's batch and for the largest batch a grid can cover."""
    arch = ARCHS[cc]
    use = cuda_arch.usage(kernels.CUDA_SOURCES[kernel], kernel, cc)
    assert use.spill_bytes == 0, f"sm_{cc}: {use}"
    for n, side in ((256, kernels.IMAGE_SIZE), (65536, kernels.IMAGE_SIZE), (64, 2048)):
        grid, block, shared = kernels.launch_config(n, side, side)
        assert grid[0] * block[0] >= n * side * side  # every pixel has a thread
        problems = cuda_arch.launch_problems(arch, grid, block, shared, use)
        assert not problems, f"sm_{cc} ({arch.where}), batch {n}x{side}x{side}: {problems}"


# -- the checks can fail ------------------------------------------------------------------

def test_a_broken_copy_is_refused_with_nvrtcs_log():
    broken = kernels.BLUR_SOURCE.replace("int acc = 0;", "int acc = 0")  # a missing semicolon
    assert broken != kernels.BLUR_SOURCE
    for cc in (75, 90):
        with pytest.raises(cuda_arch.CompileError, match=r"error: expected a \";\""):
            cuda_arch.ptx(broken, cc)


def test_a_copy_calling_an_undefined_function_is_refused():
    broken = kernels.BLUR_SOURCE.replace("min(max(", "clamp_to(max(", 1)
    with pytest.raises(cuda_arch.CompileError, match="identifier \"clamp_to\" is undefined"):
        cuda_arch.ptx(broken, 80)


def test_a_python_int_argument_would_not_match_the_c_int_parameter():
    """What scalar_args guards against: CuPy passes a Python int as 64 bits (``long long``)."""
    text = cuda_arch.ptx(kernels.BLUR_SOURCE, 75)
    untyped = ["u64", "u64"] + [PTX_TYPES[np.int64]] * 3 + ["f32"]
    assert cuda_arch.entry_params(text, kernels.KERNEL_NAME) != untyped


def test_launch_limits_refuse_what_an_architecture_cannot_run():
    use = cuda_arch.Usage(registers=64, shared_bytes=40 * 1024, stack_bytes=0, spill_bytes=0)
    problems = cuda_arch.launch_problems(ARCHS[75], (10,), (2048,), 16 * 1024, use)
    assert any("threads per block > 1024" in p for p in problems)
    assert any("registers x 2048 threads" in p for p in problems)
    assert any("bytes of shared memory per block > 49152" in p for p in problems)
    assert cuda_arch.launch_problems(ARCHS[90], (2**31,), (256,), 0, use) == [f"grid x {2**31} > {2**31 - 1}"]


def test_ptxas_report_is_parsed():
    log = ("ptxas info    : Function properties for k\nptxas         .     8 bytes stack frame, 4 bytes spill "
           "stores, 4 bytes spill loads\nptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem\n")
    assert cuda_arch.parse_usage(log, "k") == cuda_arch.Usage(40, 2048, 8, 8)
    with pytest.raises(ValueError):
        cuda_arch.parse_usage(log, "other")
