"""The fixed seed an instructor may give (``AUTOGRADER_SEED``), kept where learner code cannot read it.

With the seed, grading is deterministic: each student's workloads are drawn from it and the
student id. A learner who knew it could replay the grader's draws, so it must not be readable
from a kernel. But ``/proc/<pid>/environ`` shows the environment a process *started* with, for
as long as it runs, to any process of the same user -- the grader's included. So
``python -m autograder`` runs itself again without the variable (:func:`hide`), the seed in an
inherited memory file, and no process the grader starts gets it.
"""

from __future__ import annotations

import os
import sys

ENV = "AUTOGRADER_SEED"
FD_ENV = "AUTOGRADER_SEED_FD"  # a memory file holding the seed, in the process that may read it


def hide() -> None:
    """Take the seed out of this process's environment block: run the same command again
    (``exec``) without it, the seed in a memory file whose descriptor it inherits. Called first
    by ``__main__``."""
    fd = os.environ.get(FD_ENV)
    if fd is not None:  # the run again: no process this one starts inherits the file
        os.set_inheritable(int(fd), False)
        return
    seed = os.environ.get(ENV)
    if not seed:
        return
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env[FD_ENV] = str(_memory_file(seed, inheritable=True))
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def handed(value: str | None) -> None:
    """Take the seed handed over in a private file by the process that started this one (a
    grading slot's job, :mod:`autograder.grader.engine.slot_worker`), never through the environment."""
    os.environ.pop(FD_ENV, None)
    if value:
        os.environ[FD_ENV] = str(_memory_file(value, inheritable=False))


def base() -> str | None:
    """The instructor's seed: from the memory file :func:`hide` or :func:`handed` made, else
    (in-process use, the tests) this process's ``AUTOGRADER_SEED``. The seed lives in that
    file, not in a module variable, so this module holds no state of its own."""
    fd = os.environ.get(FD_ENV)
    if fd is not None and _is_ours(fd):
        return os.pread(int(fd), 4096, 0).decode() or None
    return os.environ.get(ENV) or None


def _is_ours(fd: str) -> bool:
    """Whether ``fd`` is the seed's memory file in this process (a child started with this
    environment, without the file, may have anything, or nothing, at that number)."""
    try:
        return os.readlink(f"/proc/self/fd/{int(fd)}").startswith("/memfd:autograder-seed")
    except (OSError, ValueError):
        return False


def _memory_file(value: str, *, inheritable: bool) -> int:
    """A descriptor of a new memory file holding ``value``."""
    fd = os.memfd_create("autograder-seed", 0 if inheritable else os.MFD_CLOEXEC)
    os.write(fd, value.encode())
    return fd


def without(env: dict[str, str]) -> dict[str, str]:
    """``env`` without the seed (what a process the grader starts may see)."""
    return {k: v for k, v in env.items() if k not in (ENV, FD_ENV)}
