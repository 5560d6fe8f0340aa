"""The image workload: NumPy and CUDA paths compute the same thing, checksums catch errors."""

import re

import numpy as np
import pytest

from course import kernels


def cuda_kernel_transcribed(img: np.ndarray) -> np.ndarray:
    """A line-by-line Python transcription of kernels.BLUR_SOURCE (one 'thread' per pixel)."""
    n, h, w = img.shape
    flat = img.ravel()
    out = np.empty(n * h * w, dtype=np.float32)
    for i in range(n * h * w):
        x = i % w
        y = (i // w) % h
        base = i - y * w - x
        acc = 0
        for dy in (-1, 0, 1):
            yy = min(max(y + dy, 0), h - 1)
            for dx in (-1, 0, 1):
                xx = min(max(x + dx, 0), w - 1)
                acc += int(flat[base + yy * w + xx])
        out[i] = np.float32(acc) * kernels.SCALE
    return out.reshape(n, h, w)


def test_cuda_source_has_the_transcribed_structure():
    src = kernels.BLUR_SOURCE
    assert 'extern "C" __global__' in src and "normalize_blur3x3" in src
    assert re.search(r"min\(max\(y \+ dy, 0\), h - 1\)", src)
    assert re.search(r"min\(max\(x \+ dx, 0\), w - 1\)", src)
    assert "out[i] = (float)acc * scale" in src


def test_numpy_blur_matches_cuda_kernel_formula_exactly():
    img = kernels.make_batch(2, size=9, seed=3, device=False)
    assert np.array_equal(kernels.blur_numpy(img), cuda_kernel_transcribed(img))


def test_blur_of_constant_image_is_normalised_constant():
    img = np.full((1, 5, 5), 255, dtype=np.uint8)
    assert np.allclose(kernels.blur_numpy(img), 1.0)


def test_batches_are_seeded():
    a = kernels.make_batch(4, seed=1, device=False)
    assert a.dtype == np.uint8 and a.shape == (4, kernels.IMAGE_SIZE, kernels.IMAGE_SIZE)
    assert np.array_equal(a, kernels.make_batch(4, seed=1, device=False))
    assert not np.array_equal(a, kernels.make_batch(4, seed=2, device=False))


def test_checksum_verifies_and_catches_errors():
    result = kernels.process(kernels.make_batch(32, seed=5))
    expected = kernels.reference_checksum(32, seed=5)
    assert kernels.matches(result, expected)
    host = np.array(kernels.backend.to_host(result))
    assert not kernels.matches(host[::-1], expected)          # reordered
    assert not kernels.matches(host[:-1], expected)           # missing element
    wrong = host.copy()
    wrong[3] += 1e-3
    assert not kernels.matches(wrong, expected)               # one wrong value


def test_bytes_touched_counts_input_and_output():
    assert kernels.bytes_touched(1, size=8) == 8 * 8 * 5


def test_emulated_kernel_takes_its_duration():
    import time

    k = kernels.emulated(0.02)
    t = time.perf_counter()
    assert k("x") == "x"
    assert 0.019 <= time.perf_counter() - t < 0.2 and k.seconds == 0.02


@pytest.mark.gpu
def test_cupy_kernel_agrees_with_numpy():
    import cupy

    host = kernels.make_batch(64, seed=11, device=False)
    gpu = kernels.blur_cupy(cupy.asarray(host))
    assert np.array_equal(cupy.asnumpy(gpu), kernels.blur_numpy(host))
    result = kernels.process(cupy.asarray(host))
    assert isinstance(result, cupy.ndarray)
    assert kernels.matches(result, kernels.reference_checksum(64, seed=11))
