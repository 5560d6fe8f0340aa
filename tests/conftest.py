"""Shared fixtures: a Ray for the tests that need one, and a GPU marker that skips cleanly."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def gpu_visible() -> bool:
    from course import backend

    return backend.gpu_status()[0]


def pytest_collection_modifyitems(config, items):
    if gpu_visible():
        return
    from course import backend

    skip = pytest.mark.skip(reason=f"no CUDA device visible: {backend.gpu_status()[1]}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before a test that grades notebooks (and before its fixtures), stop the Ray an earlier
    test left running in this process: the grading times learner and reference side by side on
    2 cores, and an idle Ray competes with it (lab 03's solution: 208 s alone, 224 s after
    ``test_cluster.py``'s Ray)."""
    if item.get_closest_marker("grading") is None or importlib.util.find_spec("ray") is None:
        return  # without Ray (a lent GPU machine) there is no Ray to stop
    import ray

    from course import cluster

    if ray.is_initialized() or cluster._emulated is not None:
        cluster.stop()


@pytest.fixture
def ray_local():
    """A quiet local Ray with 2 CPUs, started again if an earlier test stopped or replaced it
    (an emulated cluster of lab 04's tests, a 16-GPU Ray of lab 03's)."""
    import ray

    from course import cluster

    if ray.is_initialized() and (cluster._emulated is not None or ray.cluster_resources().get("CPU") != 2):
        cluster.stop()
    return cluster.start(num_cpus=2)


@pytest.fixture(scope="session")
def lab00_cohort(tmp_path_factory):
    """The lab 00 cohort graded once per session (tests/cohort_lab00.py), for the tests of
    grading and of the sandbox that read it."""
    import cohort_lab00
    from os_cohort import kill_left

    with pytest.MonkeyPatch.context() as mp:
        graded = cohort_lab00.grade(tmp_path_factory.mktemp("cohort00"), mp)
    yield graded
    kill_left(graded)


def pytest_terminal_summary(terminalreporter):
    """Name the folder the browser test keeps its screenshots in (tests/test_browser.py), where it
    was collected (a run without it -- the GPU check on a machine without nbformat -- has none)."""
    browser = sys.modules.get("test_browser")
    if browser is None:
        return
    SCREENSHOTS = browser.SCREENSHOTS
    if SCREENSHOTS.is_dir() and any(SCREENSHOTS.glob("*.png")):
        terminalreporter.write_line(f"JupyterLab screenshots: {SCREENSHOTS}")
