"""Grading slots: the cores of one machine, split so that gradings running side by side never
share one.

Ray decides *how many* gradings run on a node at once: each asks for one unit of the custom
resource :data:`RESOURCE`, and a node offers as many as it has slots (``ray start
--resources='{"autograder_slot": 2}'``; ``grade --workers N`` starts a local Ray with N).
This module decides *which* cores a grading gets. The cores this process may run on are cut
into as many equal sets as all the Ray nodes on this machine offer slots together, and a
grading takes the first free set by locking that set's file (``flock``) -- or, for a lab whose
grades need more cores than a set has, as many sets as it asked Ray units for. The kernel
releases a lock when its holder dies, so a grading killed half-way frees its cores for the retry.
CodeGrade reserves one core per container the same way (``cpuset.cpus``), so that one
submission's load does not bend another's timings.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

RESOURCE = "autograder_slot"
LOCKS = Path(tempfile.gettempdir()) / "autograder-slots"


@dataclass(frozen=True)
class Slot:
    """One claimed set of cores -- one slot's, or several slots' for a lab whose grades need more
    cores than one slot has; the lock files' descriptors hold them until :meth:`release`.

    The lock files also name the control groups of the grading running in the slot
    (:meth:`hold`), so that whoever holds the slot next -- after a grading killed half-way, Ray's
    retry -- first ends whatever that grading left running (:meth:`sweep`).
    """

    index: int                      # the first of the slots held
    cores: tuple[int, ...]
    fds: tuple[int, ...]
    paths: tuple[Path, ...]

    def hold(self, folders: tuple[Path, ...]) -> None:
        """Record the control groups the grading in this slot runs in."""
        for path in self.paths:
            path.write_text(json.dumps([str(f) for f in folders]))

    def sweep(self) -> int:
        """End what the slots' last gradings left running (their recorded groups), and thaw what a
        grading that died holding its neighbours left frozen (:mod:`autograder.grader.isolation.neighbours`);
        how many processes were ended."""
        from ..isolation.neighbours import thaw_stale

        thaw_stale(self.paths[0].parent)
        return sum(_sweep_recorded(path) for path in self.paths)

    def release(self) -> None:
        for fd in self.fds:
            os.close(fd)


def sweep_unheld(locks: Path = LOCKS, wait_s: float = 10.0) -> int:
    """End what gradings on this machine left in slots no grading holds any more, waiting up to
    ``wait_s`` for the holders of the others to die: a grade or serve that stops (Ctrl-C,
    SIGTERM) cancels its Ray tasks and shuts its Ray down, which kills each slot's Ray worker and
    so its grading process (``PR_SET_PDEATHSIG``) -- but not what that process started (nbgrader,
    the learner's kernel, a lab's Ray), which would otherwise run on until the slot is next
    claimed. A slot another run holds is left alone. How many processes were ended."""
    import time

    killed, deadline = 0, time.monotonic() + wait_s
    todo = sorted(locks.glob("slot-*.lock")) if locks.is_dir() else []
    while todo:
        for path in list(todo):
            fd = os.open(path, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                killed += _sweep_recorded(path)
            finally:
                os.close(fd)
            todo.remove(path)
        if not todo or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return killed


def _sweep_recorded(path: Path) -> int:
    """End the processes of the control groups a slot's lock file records, and clear the record."""
    from ..isolation import cgroup

    try:
        folders = json.loads(path.read_text() or "[]")
    except (OSError, ValueError):
        folders = []
    killed = cgroup.sweep(folders)
    path.write_text("")
    return killed


def split(cores: list[int], n: int) -> list[tuple[int, ...]]:
    """``cores`` cut into ``n`` contiguous, equal-as-possible sets; with fewer cores than sets,
    sets share cores round-robin (the timings then are not fair, which ``calibrate`` shows)."""
    cores = sorted(cores)
    if n <= len(cores):
        size, extra = divmod(len(cores), n)
        out, start = [], 0
        for k in range(n):
            end = start + size + (k < extra)
            out.append(tuple(cores[start:end]))
            start = end
        return out
    return [(cores[k % len(cores)],) for k in range(n)]


def claim(total: int, locks: Path = LOCKS, width: int = 1) -> Slot:
    """The first ``width`` free ones of ``total`` slots on this machine, locked for this process
    (Ray has counted ``width`` units of :data:`RESOURCE` for it, so that many are free)."""
    locks.mkdir(mode=0o700, parents=True, exist_ok=True)
    sets = split(list(os.sched_getaffinity(0)), total)
    held: list[tuple[int, int, Path]] = []
    for k in range(total):
        path = locks / f"slot-{k}-of-{total}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        held.append((k, fd, path))
        if len(held) == width:
            return Slot(held[0][0], tuple(sorted({c for k, _, _ in held for c in sets[k]})),
                        tuple(fd for _, fd, _ in held), tuple(path for _, _, path in held))
    for _, fd, _ in held:
        os.close(fd)
    taken = (f"all {total} grading slots of this machine are taken" if width == 1 else
             f"{len(held)} of this machine's {total} grading slots are free, and this grading needs {width}")
    raise RuntimeError(f"{taken}: more gradings run here than its Ray nodes offer {RESOURCE} units (is another "
                       f"cohort run using the same cores?)")


def on_this_machine() -> int:
    """How many slots all the live Ray nodes on this machine offer together (several nodes of
    one cluster may share a machine, as ``ray.cluster_utils.Cluster`` and the CI test do)."""
    import ray

    here = ray.util.get_node_ip_address()
    return int(sum(n["Resources"].get(RESOURCE, 0) for n in ray.nodes()
                   if n["Alive"] and n["NodeManagerAddress"] == here)) or 1
