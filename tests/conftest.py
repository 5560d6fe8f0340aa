"""Shared fixtures: a Ray for the tests that need one, and a GPU marker that skips cleanly."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def gpu_visible() -> bool:
    from course import backend

    return backend.gpu_status()[0]


def pytest_collection_modifyitems(config, items):
    if gpu_visible():
        return
    skip = pytest.mark.skip(reason="no CUDA device visible")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def ray_local():
    """A quiet local Ray with 2 CPUs, started again if an earlier test stopped or replaced it
    (an emulated cluster of lab 04's tests, a 16-GPU Ray of lab 03's)."""
    import ray

    from course import cluster

    if ray.is_initialized() and (cluster._emulated is not None or ray.cluster_resources().get("CPU") != 2):
        cluster.stop()
    return cluster.start(num_cpus=2)
