"""``grade --workers N`` and ``grade --ray ADDRESS``: a cohort graded side by side, one
grading per slot of a Ray cluster.

``--workers N`` starts a Ray of its own on this machine offering N grading slots;
``--ray ADDRESS`` joins a running cluster whose nodes offer them (``ray start ...
--resources='{"autograder_slot": K}'``, KubeRay's ``rayStartParams`` alike). Each submission
is one Ray task (:func:`autograder.grader.engine.slot_worker.grade`) that asks for one slot and no
CPUs of Ray's accounting: a slot is a set of cores (:mod:`autograder.grader.engine.slots`), and the
grading inside it starts its own processes and, for a Ray lab, its own Ray in its sandbox.

Ray does the scheduling and the retries: a worker or node lost mid-grading puts the task back
(``max_retries``), and the retry grades the submission from the start. This process stays the
one writer: a result is settled into the gradebook and recorded for ``resume`` once, when its
task returns, so a submission has one row however often it ran.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import replace
from pathlib import Path

from ...report import Outcome
from ..nbgrading import scratch_course
from . import slot_worker
from .settle import settle
from ..errors import SetupError
from .limits import Limits
from ..isolation.processes import own_stop_handlers
from .slots import RESOURCE

MAX_RETRIES = 3  # a lost worker or node; a grading that fails on its own is not retried


def start(workers: int | None, address: str | None) -> None:
    """Connect to the cluster at ``address``, or start a local Ray with ``workers`` slots."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    # no worker of this job writes compiled files into the kit: a grading slot holds the kit's
    # files, and a .pyc appearing there while a submission runs would read as planted
    quiet = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False,
             "runtime_env": {"env_vars": {"PYTHONDONTWRITEBYTECODE": "1"}}}
    # Ray's C++ core installs absl's failure-signal handler for SIGTERM in the driver; it prints a
    # stack and re-raises the signal with the default action, killing grade before its clean-up
    # (seen: a SIGTERM 16.5 s into grade --workers 2). The grader's own handler stops it instead.
    os.environ["RAY_DISABLE_FAILURE_SIGNAL_HANDLER"] = "1"
    with own_stop_handlers():  # a SIGTERM still stops grade as Ctrl-C does, not as Ray's driver exits
        try:
            if address:
                ray.init(address=address, **quiet)
                return
            # tasks here ask for no CPU of Ray's accounting, so num_cpus only bounds the idle workers Ray keeps ready
            with low_priority():  # this Ray's processes, and the workers it starts later, inherit it
                ray.init(address="local", num_cpus=workers, resources={RESOURCE: workers},
                         object_store_memory=100 * 2**20, **quiet)
        except BaseException:  # stopped (or failed) half-way through its start: nothing of this Ray runs on
            _end_half_started()
            raise


def _end_half_started() -> None:
    """After a ``ray.init`` cut short (a SIGTERM inside it): disconnect, and end the processes of
    the local Ray it was starting -- this process's descendants that are Ray's -- which
    ``ray.shutdown`` of a half-made connection may not know of (seen: its dashboard and
    runtime-env agents ran on; and a driver that exited still connected aborted, code -6)."""
    import ray

    from ..isolation import processes

    try:
        ray.shutdown()
    except Exception:  # a connection half made: what is left of it is ended below
        pass
    for pid in processes.ray_descendants():
        processes.kill_tree(pid)


LOW_NICE = 19


@contextlib.contextmanager
def low_priority():
    """This process at the lowest CPU priority (nice 19) for the ``with`` block, then back.

    The outer Ray of ``grade --workers N`` (its GCS, raylet and the ``ray::grade`` workers that
    wait on each slot's grading) is not pinned to any slot: on a machine whose cores are all
    slots, its bursts -- a worker starting, a task's result stored -- land inside the slots' timed
    windows. Started at nice 19 it runs only on what the slots leave; each slot's grading process
    goes back to nice 0 as it enters its slot (:func:`autograder.grader.engine.slot_worker.main`).
    """
    if os.geteuid() != 0:  # only root may raise it again (and only root grades side by side: the sandbox)
        yield
        return
    before = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, 0, LOW_NICE)
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, before)


def nodes(kit: str, sandboxed: bool) -> tuple[list[str], list[tuple[int, int]]]:
    """Every live node that offers slots, checked before anything is graded: the same kit as
    here, and a sandbox where one is required. Lines saying what each offers, and each one's
    slots and cores (what :func:`autograder.grader.engine.fair_timing.widths_on` reads)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    offering = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get(RESOURCE, 0) > 0]
    if not offering:
        raise SetupError(f"no node of this Ray cluster offers grading slots: start each node with "
                         f"ray start ... --resources='{{\"{RESOURCE}\": N}}'")
    probe = ray.remote(num_cpus=0)(_node_facts)
    facts = ray.get([probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
                     for n in offering])
    problems, lines, shapes = [], [], []
    for n, (ip, node_kit, no_sandbox, cores) in zip(offering, facts):
        slots = int(n["Resources"][RESOURCE])
        lines.append(f"node {ip}: {slots} slot(s), {cores} core(s) here")
        shapes.append((slots, cores))
        if node_kit != kit:
            problems.append(f"node {ip} runs other grading code than this machine (install the same kit version)")
        if sandboxed and no_sandbox:
            problems.append(f"node {ip} cannot make the sandbox: {no_sandbox}")
    if problems:
        raise SetupError("; ".join(problems))
    return lines, shapes


def widths(shapes: list[tuple[int, int]], labs: set[str]) -> dict[str, int]:
    """How many slots one grading of each of ``labs`` asks for on these nodes
    (:func:`autograder.grader.engine.fair_timing.widths_on`); a lab no node can serve is a setup error."""
    from . import fair_timing

    try:
        return fair_timing.widths_on(shapes, labs)
    except fair_timing.Unfit as exc:
        raise SetupError(str(exc)) from None


def _node_facts() -> tuple[str, str, str | None, int]:
    """What a node says about itself: its address, its kit, why it has no sandbox, its cores."""
    import ray

    from . import resume
    from ..isolation import sandbox

    return ray.util.get_node_ip_address(), resume.kit_fingerprint(), sandbox.unavailable(), len(os.sched_getaffinity(0))


def task():
    """The Ray task that grades one submission in a slot (:func:`autograder.grader.engine.slot_worker.grade`)."""
    import ray

    return ray.remote(num_cpus=0, resources={RESOURCE: 1}, max_retries=MAX_RETRIES,
                      retry_exceptions=False)(slot_worker.grade)


def submit(remote, course: Path, student: str, assignment: str, gradebook: bytes, limits: Limits, kit: str,
           seed: str, width: int = 1):
    """Send one submission to a slot: Ray starts it once ``width`` slots are free on one node
    (:func:`autograder.grader.engine.fair_timing.widths`). Its object ref, and the submitted files left out."""
    job, left_out = _job(course, student, assignment, gradebook, limits, kit, seed, width)
    return (remote.options(resources={RESOURCE: width}) if width > 1 else remote).remote(job), left_out


def collect(course: Path, student: str, assignment: str, ref, left_out: list[str], limits: Limits) -> tuple[Outcome, str]:
    """The outcome of a finished slot task, settled into the course (its files brought back, its
    grade in the gradebook), and where it ran; a task that failed past its retries is the
    grader's failure (``retry``), never the submission's."""
    import ray

    try:
        graded = ray.get(ref)
    except Exception as exc:  # the task failed past its retries: Ray's, the node's or the grader's fault
        return Outcome(student, assignment, error=f"grading failed in its slot ({_reason(exc)})", retry=True,
                       log=str(exc), sandboxed=limits.sandboxed), ""
    outcome = replace(graded.outcome, log=graded.outcome.log
                      + f"\n[autograder | slot] node {graded.node}, slot {graded.slot}, cores {graded.cores}")
    left_behind = _bring_back(course, student, assignment, graded)
    return settle(course, outcome, left_out, left_behind, graded.changed), f"node {graded.node}, slot {graded.slot}"


def _job(course, student, assignment, gradebook, limits, kit, seed, width=1) -> tuple[slot_worker.Job, list[str]]:
    """The scratch course of one submission, as a job any node can grade; and the submitted files left out."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="autograder-job-") as tmp:
        scratch, left_out = scratch_course.make(course, student, assignment, gradebook, Path(tmp))
        files = slot_worker.pack(scratch)
    return slot_worker.Job(student, assignment, files, limits, kit, seed or "", width), left_out


def _bring_back(course: Path, student: str, assignment: str, graded) -> list[str]:
    """The slot's autograded files into the real course (through ``bring_back``'s own checks)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="autograder-back-") as tmp:
        slot_worker.unpack(graded.files, Path(tmp) / "autograded" / student / assignment)
        return graded.left_behind + scratch_course.bring_back(Path(tmp), course, student, assignment)


def _reason(exc: Exception) -> str:
    """One line for a failed task: the error raised in it (a ``RayTaskError`` wraps it), or Ray's own."""
    cause = getattr(exc, "cause", None) or exc
    last = (str(cause).strip().splitlines() or [""])[-1]
    return f"{type(cause).__name__}: {last[:300]}"
