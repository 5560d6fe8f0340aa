"""A grading session whose learner is a copy of the reference, in a learner's sandbox.

``calibrate`` asks whether each tier tells the reference from its degraded copy *as grading
measures them*. Grading runs the learner's code in a kernel inside the OS sandbox
(:mod:`autograder.grader.isolation.sandbox`), the reference in the reference process (for a Ray lab, in
the sandbox of the lab's Ray), and calls both over the channel. Here the same session is set
up -- fresh seed, the reference process and its Ray started as for grading, the same control
group -- and the copy runs in a process sandboxed exactly as a kernel is
(:func:`autograder.grader.nbgrading.nbgrader_run.learner_spec`), serving its functions over the channel as
a kernel serves the learner's. Only nbgrader and ipykernel are left out: they run no check.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

from ..isolation import workspace
from ..nbgrading.nbgrader_run import DEFAULT_MEMORY_LIMIT_GIB, control_group, learner_spec
from ..session.reference_process import START_TIMEOUT_S, ReferenceProcess
from ..session.session import Session


@contextlib.contextmanager
def sandboxed(lab: str, copy: str, *, memory_limit_gib: float = DEFAULT_MEMORY_LIMIT_GIB) -> Iterator[Session]:
    """A :class:`Session` of ``lab`` on a fresh seed whose learner is ``copy`` (``reference`` or
    ``degraded``) running in a learner's sandbox; everything it started ends on exit."""
    from ...labs import needs_ray, ray_start

    session = Session(lab)
    space = workspace.make()  # as a grading's: size-capped
    work = space.path
    # a copy of calibrate --workers N is pinned to one slot's cores: its sandboxes stay there,
    # as a grading slot's do (joining a control group would otherwise reset their affinity)
    cores = tuple(sorted(os.sched_getaffinity(0)))
    group = control_group(lab, memory_limit_gib, cores if len(cores) < (os.cpu_count() or 0) else ())
    learner = None
    try:
        env = session.start(sandbox_dir=work, group=group)
        learner = ReferenceProcess(lab, sandbox_dir=work, copy=copy, learner=learner_spec(work, session, group),
                                   env=env)
        session.attach(learner.remote)
        if needs_ray(lab):  # as a learner's notebook does first: join the lab's Ray
            learner.remote.kit.address(ray_start(lab), what="joining the lab's Ray", returns="string",
                                       timeout_s=START_TIMEOUT_S)
        yield session
    finally:
        if learner is not None:
            learner.close()
        session.close()
        if group is not None:
            group.close()
        space.close()
