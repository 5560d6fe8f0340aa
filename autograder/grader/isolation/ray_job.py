"""The grader's Ray job: its worker processes cannot be traced or read by learner code.

In a Ray lab, the grader's reference actors and instruments run in Ray worker processes of the
same uid as learner actors (docs/security/sandbox.md). A process of that uid may read and write
another's memory through ``/proc/<pid>/mem`` unless the target is not *dumpable*
(``PR_SET_DUMPABLE`` 0: its ``/proc`` files then belong to root). Ray starts each worker with
the job's runtime environment; this module gives the grader's jobs (the reference process's,
and the kit steps' process of a lab whose reference has a Ray of its own) a
``worker_process_setup_hook`` that makes every one of its workers non-dumpable before it runs
a task. Learner jobs are not touched.

Ray reads the hook from ``RAY_RUNTIME_ENV_HOOK`` in the driver's environment (Ray's
``_private/worker.py``: ``_maybe_modify_runtime_env``), which :func:`install` sets in the
reference process only, before it starts or joins the lab's Ray.
"""

from __future__ import annotations

import ctypes
import os

PR_SET_DUMPABLE = 4
HOOK_VARIABLE = "RAY_RUNTIME_ENV_HOOK"


def not_dumpable() -> None:
    """No process of this process's user may trace it or read its memory."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def runtime_env(env: dict | None) -> dict:
    """The job's runtime environment with the hook that makes its workers non-dumpable."""
    return {**(env or {}), "worker_process_setup_hook": f"{__name__}.not_dumpable"}


def install(workers: bool = True) -> None:
    """This process (the reference process) not dumpable, and with ``workers`` every Ray worker
    of the job it starts.

    ``workers`` only where learner jobs join this process's Ray (a lab's Ray, :func:`needs_ray
    <autograder.labs.needs_ray>`): a Ray private to the reference process (labs 00 and 03) runs
    no learner code, and a job with a runtime environment costs every worker lease a call to
    Ray's runtime-env agent. Measured on 2 cores (lab 03's ``measure_policy``, the solution's
    placement groups after its custom resources, one Ray): with the hook the groups ran 33-44
    kernels/s against no quota's 67 (0.6x), without it 67 against 67 (1.0x); sandboxed
    ``calibrate 03_quotas`` read the reference at 0.65-0.90x, below its 0.75 tier, while the
    degraded copy, which never had the hook, read 0.50x every run.
    """
    not_dumpable()
    if workers:
        os.environ[HOOK_VARIABLE] = f"{__name__}.runtime_env"
