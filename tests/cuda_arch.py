"""The GPU architectures learners meet, their limits, and NVRTC compiles that need no GPU.

Limits: NVIDIA, *CUDA C++ Programming Guide*, table "Technical Specifications per Compute
Capability" (the same figures are encoded in NVIDIA CCCL's ``cuda/__device/arch_traits.h``).
Shared memory per block is 48 KiB without opting in on every one of these architectures; a
kernel may opt in to more (the "maximum amount of shared memory per thread block" row). The kit's
kernels do not opt in, so the 48 KiB figure is the one their launches must fit.

NVRTC comes from PyPI (``nvidia-cuda-nvrtc-cu12``) through CuPy's own binding
(``cupy_backends.cuda.libs.nvrtc``): createProgram / compileProgram / getPTX run on a machine
without a GPU, where ``cupy.cuda.compiler.compile_using_nvrtc`` asks the driver first and fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KIB = 1024


@dataclass(frozen=True)
class Arch:
    """One compute capability's limits (per thread block unless named per multiprocessor)."""

    cc: int                    # compute capability x 10, e.g. 75
    where: str                 # the devices learners meet it on
    threads_per_block: int     # maximum threads per block
    threads_per_sm: int        # maximum resident threads per multiprocessor
    registers_per_block: int   # maximum 32-bit registers per thread block
    registers_per_thread: int  # maximum 32-bit registers per thread
    shared_per_block: int      # bytes without opting in (static + dynamic)
    shared_per_block_optin: int  # bytes with cudaFuncAttributeMaxDynamicSharedMemorySize
    grid_x: int                # maximum x-dimension of a grid of thread blocks


def _arch(cc: int, where: str, threads_per_sm: int, optin_kib: int) -> Arch:
    """An architecture with the limits common to compute capability 7.5 to 9.0."""
    return Arch(cc, where, threads_per_block=1024, threads_per_sm=threads_per_sm, registers_per_block=64 * KIB,
                registers_per_thread=255, shared_per_block=48 * KIB, shared_per_block_optin=optin_kib * KIB,
                grid_x=2**31 - 1)


ARCHS = (
    _arch(75, "T4 (Colab's GPU)", 1024, 64),
    _arch(80, "A100", 2048, 163),
    _arch(86, "A10, RTX 30xx", 1536, 99),
    _arch(89, "L4, RTX 40xx", 1536, 99),
    _arch(90, "H100, H200", 2048, 227),
)


class CompileError(RuntimeError):
    """NVRTC refused a source; the message carries its log."""


def nvrtc():
    """CuPy's NVRTC binding (raises ImportError where cupy-cuda12x is not installed)."""
    from cupy_backends.cuda.libs import nvrtc as binding

    return binding


def compile_source(source: str, options: list[str], name: str = "kernel.cu") -> tuple[bytes, str]:
    """(output, log): PTX for ``--gpu-architecture=compute_XY``, a cubin for ``sm_XY``.

    Raises :class:`CompileError` with NVRTC's log when the source does not compile.
    """
    binding = nvrtc()
    prog = binding.createProgram(source, name, [], [])
    try:
        try:
            binding.compileProgram(prog, options)
        except binding.NVRTCError as exc:
            raise CompileError(f"{exc}\n{binding.getProgramLog(prog)}") from None
        log = binding.getProgramLog(prog)
        cubin = any(o.startswith("--gpu-architecture=sm_") for o in options)
        out = binding.getCUBIN(prog) if cubin else binding.getPTX(prog)
        return (out if isinstance(out, bytes) else out.encode()), log
    finally:
        binding.destroyProgram(prog)


def ptx(source: str, cc: int) -> str:
    """The PTX of ``source`` for virtual architecture ``compute_<cc>``."""
    return compile_source(source, [f"--gpu-architecture=compute_{cc}"])[0].decode()


@dataclass(frozen=True)
class Usage:
    """What ptxas reports for one kernel on one real architecture."""

    registers: int
    shared_bytes: int   # static shared memory
    stack_bytes: int
    spill_bytes: int


def usage(source: str, kernel: str, cc: int) -> Usage:
    """Registers, static shared memory, stack and spills of ``kernel`` compiled for ``sm_<cc>``
    (NVRTC runs ptxas with ``-v`` and returns its report in the program log)."""
    _, log = compile_source(source, [f"--gpu-architecture=sm_{cc}", "--ptxas-options=-v"])
    return parse_usage(log, kernel)


def parse_usage(log: str, kernel: str) -> Usage:
    """The :class:`Usage` of ``kernel`` in a ptxas ``-v`` report."""
    part = log.split(f"Function properties for {kernel}", 1)
    if len(part) != 2:
        raise ValueError(f"ptxas reported nothing for {kernel!r}:\n{log}")
    block = part[1].split("Function properties for", 1)[0]
    regs = re.search(r"Used (\d+) registers", block)
    if regs is None:
        raise ValueError(f"no register count for {kernel!r}:\n{log}")
    smem = re.search(r"(\d+) bytes smem", block)
    stack = re.search(r"(\d+) bytes stack frame", block)
    spills = [int(v) for v in re.findall(r"(\d+) bytes spill (?:stores|loads)", block)]
    return Usage(int(regs.group(1)), int(smem.group(1)) if smem else 0, int(stack.group(1)) if stack else 0,
                 sum(spills))


def launch_problems(arch: Arch, grid: tuple, block: tuple, dynamic_shared: int, use: Usage) -> list[str]:
    """Why a launch of ``grid`` x ``block`` with ``dynamic_shared`` bytes would fail on ``arch``
    (an empty list when it fits)."""
    threads = 1
    for b in block:
        threads *= int(b)
    problems = []
    if threads > arch.threads_per_block:
        problems.append(f"{threads} threads per block > {arch.threads_per_block}")
    if threads > arch.threads_per_sm:
        problems.append(f"{threads} threads per block > {arch.threads_per_sm} resident per multiprocessor")
    if use.registers > arch.registers_per_thread:
        problems.append(f"{use.registers} registers per thread > {arch.registers_per_thread}")
    if use.registers * threads > arch.registers_per_block:
        problems.append(f"{use.registers} registers x {threads} threads > {arch.registers_per_block} per block")
    shared = use.shared_bytes + int(dynamic_shared)
    if shared > arch.shared_per_block:
        problems.append(f"{shared} bytes of shared memory per block > {arch.shared_per_block} (no opt-in)")
    if int(grid[0]) > arch.grid_x:
        problems.append(f"grid x {grid[0]} > {arch.grid_x}")
    return problems


def entry_params(ptx_text: str, kernel: str) -> list[str]:
    """The PTX parameter types of ``kernel``'s entry, e.g. ``['u64', 'u64', 'u32', 'f32']``."""
    match = re.search(rf"\.entry\s+{re.escape(kernel)}\s*\((.*?)\)", ptx_text, re.S)
    if match is None:
        raise ValueError(f"no .entry {kernel} in the PTX")
    return re.findall(r"\.param\s+\.(\w+)", match.group(1))
