"""course.pipeline: generated images are the same wherever a block is made, and the grader's
truth is what the stages compute."""

from __future__ import annotations

import numpy as np

from course import kernels, pipeline


def test_an_image_depends_on_its_seed_and_id_only():
    ids = np.array([3, 17, 40])
    together = pipeline.raw(9, np.arange(41))[ids]
    assert np.array_equal(pipeline.raw(9, ids), together)
    assert not np.array_equal(pipeline.raw(10, ids), together)


def test_preprocess_crops_the_centre_to_the_kernel_size():
    raw = pipeline.raw(1, np.arange(2))
    out = pipeline.preprocess({"id": np.arange(2), "image": raw})
    lo = (pipeline.RAW_PX - kernels.IMAGE_SIZE) // 2
    assert out["image"].shape == (2, kernels.IMAGE_SIZE, kernels.IMAGE_SIZE)
    assert np.array_equal(out["image"][1], raw[1, lo:lo + kernels.IMAGE_SIZE, lo:lo + kernels.IMAGE_SIZE])


def test_expected_values_are_the_stages_own_result():
    ids = np.arange(40)
    batch = pipeline.preprocess({"id": ids, "image": pipeline.raw(5, ids)})
    out = pipeline.Model.__call__(object.__new__(pipeline.Model), batch)  # the stage, without the load
    assert np.allclose(out["value"], pipeline.expected(5, 40), rtol=1e-6)
    assert not np.allclose(pipeline.expected(6, 40), pipeline.expected(5, 40))
