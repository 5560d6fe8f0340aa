"""A grading's work folder (autograder/grader/isolation/workspace.py): a size-capped tmpfs that a write past
its cap fails on, whose peak use is kept, and that is gone when the grading ends -- or, where its
grader died, when the next one starts."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.grader.isolation import sandbox, workspace


@pytest.fixture
def space():
    if sandbox.unavailable():  # mounting wants what sandboxing wants: the grader as root
        if os.environ.get("COURSE_KIT_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"no sandbox here: {sandbox.unavailable()}")
        pytest.skip(f"no sandbox here: {sandbox.unavailable()}")
    made = workspace.make(cap_bytes=8 * 2**20)
    yield made
    made.close()


def _fill(folder: Path, total: int) -> int:
    """Write ``total`` bytes into ``folder`` in 1 MiB writes; how many landed before ENOSPC."""
    written = 0
    with open(folder / "fill", "wb", buffering=0) as f:
        while written < total:
            written += f.write(b"\0" * 2**20)
    return written


def test_a_write_past_the_cap_fails_there_and_the_disk_under_it_does_not_notice(space):
    assert space.capped
    disk = os.statvfs(space.path.parent)
    with pytest.raises(OSError) as err:
        _fill(space.path, 64 * 2**20)
    assert err.value.errno == errno.ENOSPC
    after = os.statvfs(space.path.parent)
    # what the filesystem under TMPDIR lost while 8 MiB were written (others write there too)
    assert (disk.f_bfree - after.f_bfree) * after.f_frsize < 4 * 2**20
    space.close()
    assert space.peak_bytes >= 7 * 2**20, space.peak_bytes
    assert not space.path.exists()
    assert str(space.path) not in Path("/proc/self/mounts").read_text()


def test_a_mount_whose_grader_died_is_detached_by_the_next_grading(space):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (space.path / workspace.OWNER).write_text(dead.stdout.strip())
    assert workspace.sweep() >= 1
    assert str(space.path) not in Path("/proc/self/mounts").read_text() and not space.path.exists()


def test_a_mount_of_a_running_grader_is_left_alone(space):
    workspace.sweep()
    assert space.path.is_dir() and str(space.path) in Path("/proc/self/mounts").read_text()


def test_the_reference_s_folder_is_a_tmpfs_of_its_own_inside_the_grading_s(space):
    """Where the reference has a Ray of its own, its folder gets the same cap, apart: filling the
    submission's folder leaves the reference's room untouched, and detaching the outer folder
    detaches both."""
    inner = workspace.make(cap_bytes=8 * 2**20, at=space.path / "reference")
    assert inner.capped and inner.path.is_dir()
    with pytest.raises(OSError):
        _fill(space.path, 64 * 2**20)
    assert inner.used_bytes() < 2**20
    assert _fill(inner.path, 4 * 2**20) == 4 * 2**20
    space.close()
    mounts = Path("/proc/self/mounts").read_text()
    assert str(space.path) not in mounts and str(inner.path) not in mounts
