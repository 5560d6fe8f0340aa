"""The fixed seed an instructor may give (``AUTOGRADER_SEED``), kept where learner code cannot read it.

With the seed, grading is deterministic: each student's workloads are drawn from it and the
student id. A learner who knew it could replay the grader's draws, so it must not be readable
from a kernel. But ``/proc/<pid>/environ`` shows the environment a process *started* with, for
as long as it runs, to any process of the same user -- the grader's included. So
``python -m autograder`` runs itself again without the variable (:func:`hide`), reading the
seed from an inherited pipe into this module, and no process the grader starts gets it.
"""

from __future__ import annotations

import os
import sys

ENV = "AUTOGRADER_SEED"
FD_ENV = "AUTOGRADER_SEED_FD"  # the pipe the seed comes through after the re-run
_base: str | None = None


def hide() -> None:
    """Take the seed out of this process's environment block: run the same command again
    (``exec``) without it, the seed passed through a pipe. Called first by ``__main__``."""
    global _base
    fd = os.environ.pop(FD_ENV, None)
    if fd is not None:
        with os.fdopen(int(fd)) as pipe:
            _base = pipe.read() or None
        return
    seed = os.environ.get(ENV)
    if not seed:
        return
    read, write = os.pipe()
    os.write(write, seed.encode())
    os.close(write)
    os.set_inheritable(read, True)
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env[FD_ENV] = str(read)
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def handed(value: str | None) -> None:
    """Take the seed handed over in a private file by the process that started this one (a
    grading slot's job, :mod:`autograder.grader.slot_worker`), never through the environment."""
    global _base
    _base = value or None


def base() -> str | None:
    """The instructor's seed: handed over by :func:`hide`, else (in-process use, the tests)
    this process's ``AUTOGRADER_SEED``."""
    return _base if _base is not None else (os.environ.get(ENV) or None)


def without(env: dict[str, str]) -> dict[str, str]:
    """``env`` without the seed (what a process the grader starts may see)."""
    return {k: v for k, v in env.items() if k not in (ENV, FD_ENV)}
