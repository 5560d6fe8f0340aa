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


@pytest.fixture(scope="session")
def ray_local():
    """One quiet local Ray for the whole test session."""
    from course import cluster

    info = cluster.start(num_cpus=2)
    yield info
    cluster.stop()
