"""course.pipeline and course.convnet: generated JPEGs are the same wherever a block is made,
the CPU stage decodes and resizes them, and the grader's truth is what the stages compute."""

from __future__ import annotations

import numpy as np
import pytest

from course import backend, convnet, pipeline


def test_an_image_depends_on_its_seed_and_id_only():
    ids = np.array([3, 17, 40])
    together = pipeline.jpegs(9, np.arange(41))[ids]
    assert list(pipeline.jpegs(9, ids)) == list(together)
    assert list(pipeline.jpegs(10, ids)) != list(together)
    assert all(data[:2] == b"\xff\xd8" for data in together)  # JPEG's start-of-image marker


def test_preprocess_decodes_and_resizes_to_the_network_input():
    out = pipeline.preprocess({"id": np.arange(2), "jpeg": pipeline.jpegs(1, np.arange(2))})
    assert out["image"].shape == (2, convnet.INPUT_PX, convnet.INPUT_PX, 3) and out["image"].dtype == np.uint8
    # a decoded JPEG is close to the picture it was made from (lossy, so not equal)
    small = pipeline.decode(pipeline.encode(pipeline.picture(1, 0)), pipeline.SOURCE_PX).astype(int)
    assert np.abs(small - pipeline.picture(1, 0).astype(int)).mean() < 8


def test_jpeg_sizes_grow_with_the_pixels():
    sizes = [pipeline.jpeg_bytes(px, count=2) for px in (64, 128, 256)]
    assert sizes[0] < sizes[1] < sizes[2]


def test_expected_values_are_the_stages_own_result():
    ids = np.arange(12)
    batch = pipeline.preprocess({"id": ids, "jpeg": pipeline.jpegs(5, ids)})
    out = pipeline.Model()(batch)
    assert out["value"].shape == (12, convnet.CLASSES)
    assert np.allclose(out["value"], pipeline.expected(5, 12), rtol=1e-3, atol=1e-4)
    assert np.allclose(pipeline.expected(5, 12, [3, 7]), pipeline.expected(5, 12)[[3, 7]], rtol=1e-5, atol=1e-6)
    assert not np.allclose(pipeline.expected(6, 12), pipeline.expected(5, 12), rtol=1e-3, atol=1e-4)


def test_convolution_is_im2col_of_a_direct_convolution():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 9, 7, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    for stride in (1, 2):
        got = convnet._conv3x3(x, w, b, stride)
        padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
        ho, wo = (9 - 1) // stride + 1, (7 - 1) // stride + 1
        want = np.zeros((2, ho, wo, 4), dtype=np.float64)
        for i in range(ho):
            for j in range(wo):
                patch = padded[:, i * stride:i * stride + 3, j * stride:j * stride + 3, :]
                want[:, i, j] = np.einsum("nhwc,hwco->no", patch, w) + b
        assert np.allclose(got, np.maximum(want, 0), rtol=1e-5, atol=1e-5)


def test_flops_are_counted_from_the_layers():
    # conv1 stride 2: 112x112x8 outputs of 27 MACs; pool; 56x56x16 of 72; pool; 28x28x32 of 144; fc 32x10
    want = 2 * (112 * 112 * 8 * 27 + 56 * 56 * 16 * 72 + 28 * 28 * 32 * 144 + 32 * 10)
    assert convnet.flops(224) == want
    assert convnet.reference(np.zeros((1, 64, 64, 3), np.uint8)).shape == (1, convnet.CLASSES)  # any side


@pytest.mark.gpu
def test_the_gpu_network_agrees_with_numpy():
    if not backend.on_gpu():
        pytest.skip("no GPU backend here")
    images = np.random.default_rng(1).integers(0, 256, (16, 224, 224, 3), dtype=np.uint8)
    assert np.allclose(convnet.Network()(images), convnet.reference(images), rtol=1e-3, atol=1e-4)
