"""The course's GPU workload: "process N images per second".

Every lab measures the same job, so numbers compare across labs: a batch of grayscale uint8
images is normalised to [0, 1], blurred with a 3x3 box filter (edges clamped) and reduced to
one float per image (the mean brightness of the blurred image). On a GPU this is one CUDA
kernel (:data:`BLUR_SOURCE`) plus a CuPy reduction; on a CPU the same arithmetic in NumPy.

Inputs are seeded and generated on the host, so both backends see identical pixels, and
:func:`checksum` lets the grader verify any learner's output against a reference.
"""

from __future__ import annotations

import time

import numpy as np

from . import backend

IMAGE_SIZE = 64  # pixels per side; small enough for 2-core laptops, large enough to be memory-bound
SCALE = np.float32(1.0 / (9.0 * 255.0))  # box mean and [0, 1] normalisation in one multiply

# One thread per output pixel. The sum of nine uint8 neighbours is exact in an int, so the
# only rounding is the single float multiply -- the NumPy path does the same, pixel for pixel.
BLUR_SOURCE = r"""
extern "C" __global__
void normalize_blur3x3(const unsigned char* img, float* out, const int n, const int h,
                       const int w, const float scale) {
    long long i = (long long)blockDim.x * blockIdx.x + threadIdx.x;
    long long total = (long long)n * h * w;
    if (i >= total) return;
    int x = (int)(i % w);
    int y = (int)((i / w) % h);
    long long base = i - (long long)y * w - x;   // first pixel of this image
    int acc = 0;
    for (int dy = -1; dy <= 1; ++dy) {
        int yy = min(max(y + dy, 0), h - 1);
        for (int dx = -1; dx <= 1; ++dx) {
            int xx = min(max(x + dx, 0), w - 1);
            acc += img[base + (long long)yy * w + xx];
        }
    }
    out[i] = (float)acc * scale;
}
"""

# How blur_cupy launches it: one thread per pixel, THREADS_PER_BLOCK to a block, no shared memory.
# tests/test_nvrtc.py checks these against each GPU architecture's limits.
KERNEL_NAME = "normalize_blur3x3"
THREADS_PER_BLOCK = 256
SHARED_MEMORY_BYTES = 0

# Every CUDA source the kit ships, by kernel name: tests/test_nvrtc.py compiles each with NVRTC
# for the architectures learners meet, on a machine without a GPU.
CUDA_SOURCES = {KERNEL_NAME: BLUR_SOURCE}

_compiled = None


def make_batch(n: int, size: int = IMAGE_SIZE, seed: int = 0, *, device: bool = True):
    """``n`` seeded random ``size`` x ``size`` uint8 images, on the backend's device.

    Generated with NumPy on the host so the pixels are the same on every backend.
    """
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, size, size), dtype=np.uint8)
    return backend.to_device(images) if device else images


def blur_numpy(images: np.ndarray) -> np.ndarray:
    """Normalised 3x3 box blur of a (n, h, w) uint8 batch, in NumPy (float32, same shape)."""
    padded = np.pad(images, ((0, 0), (1, 1), (1, 1)), mode="edge").astype(np.int32)
    h, w = images.shape[1:]
    acc = np.zeros(images.shape, dtype=np.int32)
    for dy in range(3):
        for dx in range(3):
            acc += padded[:, dy : dy + h, dx : dx + w]
    return acc.astype(np.float32) * SCALE


def _kernel():
    """The compiled CUDA kernel (compiled once per process, on first use)."""
    global _compiled
    if _compiled is None:
        import cupy

        _compiled = cupy.RawKernel(BLUR_SOURCE, KERNEL_NAME)
    return _compiled


def launch_config(n: int, h: int, w: int) -> tuple[tuple[int], tuple[int], int]:
    """(grid, block, shared memory bytes) of the kernel for a (n, h, w) batch: one thread per pixel."""
    total = int(n) * int(h) * int(w)
    return ((total + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK,), (THREADS_PER_BLOCK,), SHARED_MEMORY_BYTES


def scalar_args(n: int, h: int, w: int) -> tuple:
    """The kernel's scalar arguments, typed as its C signature wants (``int`` x 3, ``float``).

    CuPy passes a Python ``int`` as a 64-bit integer, which a C ``int`` parameter would misread,
    so each is a NumPy scalar of the exact width.
    """
    return np.int32(n), np.int32(h), np.int32(w), SCALE


def blur_cupy(images):
    """Normalised 3x3 box blur of a (n, h, w) uint8 CuPy batch, with the CUDA kernel."""
    import cupy

    images = cupy.ascontiguousarray(images, dtype=cupy.uint8)
    n, h, w = images.shape
    out = cupy.empty(images.shape, dtype=cupy.float32)
    grid, block, shared = launch_config(n, h, w)
    _kernel()(grid, block, (images, out, *scalar_args(n, h, w)), shared_mem=shared)
    return out


def process(images):
    """The workload: one float32 per image, its mean blurred brightness.

    Runs on the backend that holds ``images``; launches asynchronously on a GPU (call
    :func:`course.backend.sync` before reading a clock).
    """
    if backend.on_gpu() and not isinstance(images, np.ndarray):
        return blur_cupy(images).mean(axis=(1, 2), dtype="float32")
    return blur_numpy(np.asarray(backend.to_host(images))).mean(axis=(1, 2), dtype=np.float32)


class BatchRun:
    """``run(n)``: :func:`process` on a batch of ``n`` seeded images, each size made once.

    What a batch-size sweep times. The grader builds one for its own sweep, and has one built
    in the learner's process for the learner's ``best_batch_size``: there a call costs what the
    kernel costs, not a round trip to the grader as well (a round trip per call made small
    batches look slower to the learner than to the grader's sweep).
    """

    def __init__(self, seed: int, sizes):
        from . import bench

        bench.steady_allocator()  # big batches must not time the allocator
        self.batches = {int(n): make_batch(int(n), seed=int(seed) % 1000 + int(n)) for n in sizes}

    def __call__(self, n):
        if n not in self.batches:
            raise ValueError(f"run(n) takes one of the candidates {list(self.batches)}; got {n!r}")
        process(self.batches[n])
        backend.sync()


def checksum(result) -> float:
    """A single number summarising a result vector, stable across backends to ~1e-6.

    A seeded weighted sum: any missing, reordered or wrong element changes it.
    """
    values = np.asarray(backend.to_host(result), dtype=np.float64).ravel()
    weights = np.random.default_rng(len(values)).uniform(0.5, 1.5, size=len(values))
    return float(values @ weights)


def reference_checksum(n: int, seed: int = 0, size: int = IMAGE_SIZE) -> float:
    """The checksum of ``process(make_batch(n, size, seed))`` computed on the host."""
    images = make_batch(n, size, seed, device=False)
    return checksum(blur_numpy(images).mean(axis=(1, 2), dtype=np.float32))


def matches(result, expected: float, rtol: float = 1e-5) -> bool:
    """Whether a result's checksum equals an expected checksum, to float tolerance."""
    return bool(np.isclose(checksum(result), expected, rtol=rtol, atol=0.0))


def bytes_touched(n: int, size: int = IMAGE_SIZE) -> int:
    """Bytes a batch moves through memory at least once: uint8 in, float32 blurred out.

    Used for roofline comparisons (achieved bytes/s against the memory bandwidth).
    """
    return n * size * size * (1 + 4)


def emulated(seconds: float):
    """A stand-in kernel that takes ``seconds`` of wall time and no compute.

    Used where a lesson needs a fixed, known kernel duration (e.g. a fleet of logical GPUs
    on one machine). Lessons that use it say so: it is a sleep, not GPU work.
    """

    def kernel(batch=None):
        time.sleep(seconds)
        return batch

    kernel.seconds = seconds
    return kernel
