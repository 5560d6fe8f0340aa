"""The system calls no sandboxed process may make: a seccomp filter for every sandbox.

In a Ray lab, learner actors run in the lab's Ray workers, as the same uid as the grader's Ray
instruments and the reference's actors (docs/security/sandbox.md). A uid alone would let them
stop a reference actor while its turn is timed, renice it, pin it to a busy core, or trace it.
This filter, loaded by bubblewrap (``--seccomp``) into every process of every sandbox, refuses
exactly those calls (``EPERM``), whoever the target:

* the stop signals (``SIGSTOP``, ``SIGTSTP``, ``SIGTTIN``, ``SIGTTOU``) by any signalling call;
* ``ptrace``, ``process_vm_readv``/``writev``, ``pidfd_getfd``, ``kcmp`` and
  ``perf_event_open`` (reading or steering another process);
* priority, I/O priority, CPU affinity and resource limits of *another* process, and the
  starving scheduling policies for it (``setpriority``, ``ioprio_set``, ``sched_setaffinity``,
  ``prlimit64``, ``sched_setattr`` with a pid other than 0, ``sched_setscheduler`` to
  ``SCHED_BATCH`` or ``SCHED_IDLE``); ``nice()``, ``setrlimit`` and ``sched_setaffinity(0, ...)``
  of the caller itself stay allowed. A thread that sets its own affinity by its thread id is
  refused too (a filter cannot tell a tid from another process's pid): nothing the kit runs does
  (traced: ipykernel, ZeroMQ, Ray's raylet, GCS and workers make no such call), and pinning a
  reference actor to a busy core while the learner's own run on the free ones is exactly what
  this refuses.

Killing a process stays allowed: lab 02's learners kill their own actors by pid. A grader
process killed by learner code ends that submission's grading with an error, which costs only
its own points. Docker's default profile refuses ``ptrace`` and the others the same way.

The filter is compiled with libseccomp (``pyseccomp``, a ctypes binding of Debian's
``libseccomp2``); where either is missing, :func:`filter_file` returns ``None`` and the sandbox
runs without it (:func:`unavailable` says why).
"""

from __future__ import annotations

import atexit
import errno
import functools
import os
import signal
import tempfile

STOP_SIGNALS = (signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)
# each signalling call and the argument that holds the signal number
SIGNALLING = {"kill": 1, "tkill": 1, "tgkill": 2, "rt_sigqueueinfo": 1, "rt_tgsigqueueinfo": 2,
              "pidfd_send_signal": 1}
REFUSED = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "perf_event_open")
# calls that change another process when their pid argument (index given) is not 0 (the caller)
OTHERS_ONLY = {"setpriority": 1, "ioprio_set": 1, "sched_setattr": 0, "prlimit64": 0, "sched_setaffinity": 0}
# scheduling policies that starve a process on a busy machine (sched_setscheduler's argument 1,
# SCHED_RESET_ON_FORK masked off). A thread's own policy is set by its tid, which seccomp cannot
# tell from another process's pid (ZeroMQ's threads re-apply theirs: its kernel died when all of
# sched_setscheduler was refused), so only these policies are refused for a pid other than 0.
STARVING_POLICIES = (3, 5)  # SCHED_BATCH, SCHED_IDLE


def build():
    """The filter as a ``pyseccomp.SyscallFilter`` (allow by default, refuse the calls above)."""
    import pyseccomp as sc

    refuse = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(defaction=sc.ALLOW)
    for call, arg in SIGNALLING.items():
        for sig in STOP_SIGNALS:
            f.add_rule(refuse, call, sc.Arg(arg, sc.EQ, int(sig)))
    for call in REFUSED:
        f.add_rule(refuse, call)
    for call, arg in OTHERS_ONLY.items():
        f.add_rule(refuse, call, sc.Arg(arg, sc.NE, 0))
    for policy in STARVING_POLICIES:
        f.add_rule(refuse, "sched_setscheduler", sc.Arg(0, sc.NE, 0), sc.Arg(1, sc.MASKED_EQ, 0xFF, policy))
    return f


@functools.lru_cache(maxsize=1)
def _compiled() -> tuple[str | None, str]:
    """(path of the compiled BPF program, "") or (None, why not); made once per process."""
    try:
        f = build()
    except (ImportError, OSError, RuntimeError, ValueError) as exc:
        return None, f"no seccomp filter ({type(exc).__name__}: {exc})"
    fd, path = tempfile.mkstemp(prefix="autograder-seccomp-", suffix=".bpf")
    try:
        with os.fdopen(fd, "wb") as out:
            f.export_bpf(out)
    except (OSError, RuntimeError) as exc:
        os.unlink(path)
        return None, f"no seccomp filter ({type(exc).__name__}: {exc})"
    atexit.register(_remove, path)
    return path, ""


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def filter_file() -> str | None:
    """The compiled filter bubblewrap loads (``--seccomp FD``), or ``None`` where none can be made."""
    return _compiled()[0]


def unavailable() -> str:
    """Why no filter can be made here, or ``""``."""
    return _compiled()[1]
