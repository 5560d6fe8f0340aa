"""A grading's work folder: a size-capped tmpfs of its own, so that no submission fills a disk.

Everything a grading's sandboxes may write outside their private tmpfs (``/tmp``, ``/dev/shm``,
the home, the kernel's working folder) lives in one folder the grader makes per grading: the
kernel's IPython profile and sockets, and the session folders of the lab's Ray and of the
reference's own (Ray's logs, and its spilled objects). Made with ``mkdtemp`` in the grader's
``TMPDIR``, that folder sat on the disk the grader, the other slots and the machine's other users
share: a lab 00 submission writing into its IPython profile's folder put 2.8 GB there and held a
3 GiB filesystem at 1 MiB free for 200 s (issue 45).

Here it is a tmpfs mounted by the grader (it runs as root wherever it can sandbox), capped at
:data:`CAP_BYTES`: a write past the cap fails with ``ENOSPC`` in the process that made it, and
nothing else on the machine notices. Its pages are charged to the memory control group of the
process that wrote them -- the submission's, under its memory cap. It is unmounted when the
grading ends; a grader killed half-way leaves its mount, which the next :func:`make` detaches
(each mount names its grader's pid). Where no tmpfs can be mounted (no privilege), the folder is
a plain one, and :attr:`Workspace.capped` says so.

Where the reference has a Ray of its own, that Ray's folder is a second tmpfs inside the first,
with the same cap (:meth:`Session.start <autograder.grader.session.session.Session.start>`): the two sides
get the same room, and a submission that fills its own cannot make the reference's Ray fail to
write its logs in the reference's timed turns.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

CAP_BYTES = 2 * 2**30  # a grading's work folder (PrairieLearn's external grader allows 1 GiB of disk)
PREFIX = "autograder-sandbox-"
OWNER = ".grader-pid"  # in each mount: the pid of the grader that mounted it
SAMPLE_S = 0.25  # how often the folder's use is read (for its peak)


@dataclass
class Workspace:
    """One grading's work folder; :meth:`close` unmounts and removes it."""

    path: Path
    capped: bool
    peak_bytes: int = 0
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    def used_bytes(self) -> int:
        """What the tmpfs holds now (0 for a plain folder: its use is not watched)."""
        if not self.capped:
            return 0
        try:
            st = os.statvfs(self.path)
        except OSError:
            return 0
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def _watch(self) -> None:
        """Keep :attr:`peak_bytes` up to date until :meth:`close` (a tmpfs only: a statvfs call)."""
        while not self._stop.wait(SAMPLE_S):
            self.peak_bytes = max(self.peak_bytes, self.used_bytes())

    def close(self) -> None:
        """Read the folder's use one last time, then unmount (lazily: a process that outlived the
        grading may still hold a file open) and remove it."""
        self._stop.set()
        if self.capped:
            self.peak_bytes = max(self.peak_bytes, self.used_bytes())
            _detach(self.path)
        shutil.rmtree(self.path, ignore_errors=True)


def make(cap_bytes: int = CAP_BYTES, *, at: Path | None = None) -> Workspace:
    """A new work folder in ``TMPDIR`` (or the new folder ``at``): a tmpfs capped at ``cap_bytes``
    where one can be mounted."""
    if at is None:
        sweep()
        path = Path(tempfile.mkdtemp(prefix=PREFIX))
    else:
        path = Path(at)
        path.mkdir(mode=0o700)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={cap_bytes},mode=0755,nosuid,nodev",
                              "autograder-work", str(path)], capture_output=True).returncode == 0
    os.chmod(path, 0o755)  # sandboxes pass through it to their own folders inside
    space = Workspace(path, capped=mounted)
    if mounted:
        (path / OWNER).write_text(str(os.getpid()))
        threading.Thread(target=space._watch, name="autograder-workspace", daemon=True).start()
    return space


def sweep() -> int:
    """Detach the work folders that graders no longer running left mounted; how many."""
    done = 0
    for folder in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        try:
            pid = int((folder / OWNER).read_text())
        except (OSError, ValueError):
            continue
        if not Path(f"/proc/{pid}").exists():
            _detach(folder)
            shutil.rmtree(folder, ignore_errors=True)
            done += 1
    return done


def _detach(path: Path) -> None:
    subprocess.run(["umount", "--lazy", str(path)], capture_output=True)
