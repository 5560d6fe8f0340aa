"""One submission's grading in a grading slot, on whichever Ray node has a free one.

The cohort run (:mod:`autograder.grader.engine.pool`) sends a :class:`Job`: the scratch course's few
files as bytes (``nbgrader_config.py``, the template gradebook, the submitted notebook), never
a path into the real course, which may be on another machine. :func:`grade` runs as a Ray
task: it claims a slot's cores (:mod:`autograder.grader.engine.slots`), writes the scratch course into
a folder of its own, and grades it in a fresh process of its own
(``python -m autograder.grader.engine.slot_worker FOLDER``), pinned to those cores, with the Ray
task's ``RAY_*`` variables left out so that the lab's own Ray knows nothing of this one. That
process dies with the task (``PR_SET_PDEATHSIG``): a worker killed half-way leaves no
grading running, and Ray's retry grades the submission again from the start.

What comes back is plain data (:class:`Graded`): the outcome and the autograded notebook's
files. Only the process that started ``grade`` writes the gradebook, the CSV and the report.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ...report import Outcome
from ..nbgrading import scratch_course
from .limits import Limits
from ..isolation.processes import SAFE_PATH

PR_SET_PDEATHSIG = 1
SLOT_PROCESSES = 16384  # the whole grading's; its sandboxes' own caps are lower, inside it


class KitMismatch(RuntimeError):
    """A node runs other grading code than the machine that started ``grade``."""


@dataclass
class Job:
    """What one grading needs, as plain data."""

    student: str
    assignment: str
    files: dict[str, bytes]          # the scratch course, by path relative to it
    limits: Limits
    kit: str                         # the grading code's fingerprint on the machine that sent it
    seed: str = ""                   # the instructor's AUTOGRADER_SEED, if set (in a private file, never the environment)
    width: int = 1                   # slots it takes: more for a lab whose grades need more cores (fair_timing.widths)


@dataclass
class Graded:
    """What a slot hands back: the outcome, the autograded folder's files, and where it ran."""

    outcome: Outcome
    files: dict[str, bytes] = field(default_factory=dict)
    left_behind: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)   # kit files the grading changed (put back)
    node: str = ""
    slot: int = 0
    cores: tuple[int, ...] = ()


def pack(folder: Path) -> dict[str, bytes]:
    """The regular files under ``folder`` (a scratch course, an autograded folder) as bytes, by relative path."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def unpack(files: dict[str, bytes], root: Path) -> None:
    """Write ``files`` (relative paths, from :func:`pack` or a slot) under ``root``."""
    for rel, data in files.items():
        path = root / rel
        if path.resolve().is_relative_to(root.resolve()):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def grade(job: Job) -> Graded:
    """The Ray task: claim a slot, grade the job in a process of its own there, hand back the result."""
    import ray

    from . import resume, slots

    if resume.kit_fingerprint() != job.kit:
        raise KitMismatch(f"node {ray.util.get_node_ip_address()} runs other grading code than the machine that "
                          "started grade: install the same version of the kit on every node")
    slot = slots.claim(slots.on_this_machine(), width=job.width)
    try:
        slot.sweep()  # what a grading killed in this slot before left running
        with tempfile.TemporaryDirectory(prefix="autograder-slot-") as tmp:
            root = Path(tmp)
            unpack(job.files, root / "course")
            (root / "job.pickle").write_bytes(pickle.dumps((job, slot)))
            env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
            env["PYTHONDONTWRITEBYTECODE"] = "1"
            done = subprocess.run([sys.executable, *SAFE_PATH, "-m", __name__, str(root)], env=env,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True)
            if done.returncode != 0 or not (root / "graded.pickle").exists():
                raise RuntimeError(f"the grading process ended with code {done.returncode}: {done.stderr[-1500:]}")
            graded: Graded = pickle.loads((root / "graded.pickle").read_bytes())
    finally:
        slot.sweep()
        slot.release()
    graded.node, graded.slot, graded.cores = ray.util.get_node_ip_address(), slot.index, slot.cores
    return graded


def _die_with_parent() -> None:
    """This process gets SIGKILL when the Ray worker that started it dies."""
    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the line above
        os._exit(1)


def _enter_group(slot) -> None:
    """This process, and so all it starts, into a control group of the slot's cores: its
    sandboxes' groups are made inside it, and the slot's next holder ends whatever it leaves
    (:meth:`autograder.grader.engine.slots.Slot.sweep`). Without cgroups, the affinity alone holds."""
    from ..isolation import cgroup

    group = cgroup.create(memory_bytes=None, processes=SLOT_PROCESSES, cpus=slot.cores,
                          name=f"autograder-slot{slot.index}", pausable=True)
    if group is not None:
        slot.hold(group.enter(os.getpid()))


def main(root: Path) -> None:
    """The grading process: the scratch course under ``root`` graded on the slot's cores."""
    from ... import seed
    from ..nbgrading import nbgrader_run
    from ..isolation.neighbours import Neighbours

    _die_with_parent()
    job, slot = pickle.loads((root / "job.pickle").read_bytes())
    seed.handed(job.seed)
    cores = slot.cores
    os.sched_setaffinity(0, cores)
    try:  # started by the outer Ray at low priority (autograder.grader.engine.pool.low_priority): the slot's own work is not
        os.setpriority(os.PRIO_PROCESS, 0, 0)
    except PermissionError:  # not root: every slot stays at the same low priority
        pass
    _enter_group(slot)
    sys.dont_write_bytecode = True
    scratch = root / "course"
    untouchable = scratch_course.Untouchable(None, nbgrader_run.KIT_ROOT)
    try:
        outcome = nbgrader_run.autograde(scratch, job.assignment, job.student, job.limits, cpus=cores,
                                         neighbours=Neighbours(slot.paths, slot.paths[0].parent))
    finally:
        changed = untouchable.restore()
    with tempfile.TemporaryDirectory(prefix="autograder-back-") as tmp:  # bring_back's checks, then read
        left = scratch_course.bring_back(scratch, Path(tmp), job.student, job.assignment)
        back = Path(tmp) / "autograded" / job.student / job.assignment
        files = pack(back) if back.is_dir() else {}
    graded = Graded(outcome, files, left, changed)
    (root / "graded.pickle").write_bytes(pickle.dumps(graded))


if __name__ == "__main__":  # by its module name, so that what it pickles unpickles in the Ray task
    from autograder.grader.engine.slot_worker import main as slot_main

    slot_main(Path(sys.argv[1]))
