"""Nothing a submission starts outlives it: find and end every process it left behind.

The grader makes itself a *child subreaper* (Linux ``PR_SET_CHILD_SUBREAPER``): a process that
a submission's kernel starts and then abandons -- a detached daemon, Ray's processes after a
killed kernel -- is re-parented to the grader instead of to init, so it stays among the
grader's descendants. :class:`Leftovers` records those descendants before a submission and
ends the new ones after it (SIGKILL: a submission's processes get no say), reaping them.
:func:`run_watched` runs one submission's ``nbgrader`` with a wall-clock limit and a memory
cap on its whole process tree.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
OUTPUT_LIMIT_BYTES = 64 * 2**20  # what a graded process may write to stdout or stderr
# ``python -P`` (3.11+): no working folder first on sys.path, where a submission could plant a
# module that a grader process started later (or importing lazily) would run.
SAFE_PATH = ["-P"] if sys.version_info >= (3, 11) else []


@contextlib.contextmanager
def sigterm_as_ctrl_c():
    """SIGTERM (``kill``, a hub stopping its service, a CI timeout) ends a command as Ctrl-C does:
    its ``finally`` blocks then end what it started -- the ``nbgrader autograde`` of a submission,
    the reference process, the sandboxes -- instead of leaving them running, orphaned."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    except ValueError:  # not the main thread (a caller embedding the grader): signals are its business
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(*_args) -> None:
    raise KeyboardInterrupt


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux only); whether it worked."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process this user can see."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            out[int(stat.parent.name)] = int(fields[1])
        except (OSError, ValueError, IndexError):
            continue
    return out


def descendants(pid: int | None = None, *, skip: set[int] = frozenset()) -> set[int]:
    """Every live descendant of ``pid`` (default: this process), not looking below ``skip``.

    Processes in ``skip`` (and whatever they start) are left out: what already ran before a
    submission -- the test suite's own Ray, say -- is not the submission's.
    """
    pid = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found and child not in skip:
                found.add(child)
                todo.append(child)
    return found


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:80] or "?"


class Leftovers:
    """Processes that appear among this process's descendants during one submission."""

    def __init__(self):
        self.enabled = become_subreaper()
        self.before = descendants() if self.enabled else set()

    def end(self, settle_s: float = 2.0) -> list[str]:
        """Kill every descendant that was not there before; the command lines of those killed.

        Repeats until none is left (a process may fork while being killed), for at most
        ``settle_s`` seconds, and reaps the ones re-parented to this process.
        """
        if not self.enabled:
            return []
        killed: dict[int, str] = {}
        deadline = time.monotonic() + settle_s
        while True:
            new = {p for p in descendants(skip=self.before) if not _zombie(p)}
            if not new or time.monotonic() > deadline:
                break
            for pid in new:
                killed.setdefault(pid, _command(pid))
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.05)
            _reap(killed)
        _reap(killed)
        return sorted(set(killed.values()))


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _reap(pids) -> None:
    """Collect the exit status of those of ``pids`` that are (now) this process's children."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def not_ray(commands: list[str]) -> list[str]:
    """The commands that are not Ray's own processes (an idle worker often outlives its driver
    by a moment; that is Ray's normal shutdown, not the submission's doing)."""
    return [c for c in commands if "ray::" not in c and "/ray/" not in c]


def memory_bytes(pids) -> int:
    """Memory the processes ``pids`` use together: the sum of their proportional set sizes
    (shared pages, such as Ray's object store, split among the processes that map them), or of
    their resident sizes where the kernel does not report PSS."""
    total = 0
    for pid in pids:
        for path, key in ((f"/proc/{pid}/smaps_rollup", "Pss:"), (f"/proc/{pid}/status", "VmRSS:")):
            try:
                line = next((ln for ln in Path(path).read_text().splitlines() if ln.startswith(key)), None)
            except OSError:
                continue
            if line:
                total += int(line.split()[1]) * 1024
                break
    return total


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every descendant of it."""
    for p in [pid, *descendants(pid)]:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def run_watched(cmd: list[str], *, cwd, env: dict, timeout_s: float,
                memory_limit_bytes: float | None = None, poll_s: float = 0.5,
                output_limit_bytes: int = OUTPUT_LIMIT_BYTES) -> subprocess.CompletedProcess:
    """Run ``cmd`` to completion, stopping it (and everything it started) when it runs past
    ``timeout_s`` (return code 124), when its process tree uses more than
    ``memory_limit_bytes`` (return code 137), or when it writes more than
    ``output_limit_bytes`` to stdout or stderr (return code 125: a kernel inherits them and
    could write without end). The output goes to files, not to this process's memory; what is
    returned is at most the last ``output_limit_bytes`` of each. The reason is the last line of stderr."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        try:
            why = _watch(proc, out, err, timeout_s, memory_limit_bytes, poll_s, output_limit_bytes)
        except BaseException:  # the grader itself is stopped (Ctrl-C, SIGTERM): the command goes with it
            kill_tree(proc.pid)
            proc.wait()
            raise
        stdout, stderr = _tail(out, output_limit_bytes), _tail(err, output_limit_bytes)
    if why:
        return subprocess.CompletedProcess(cmd, why[0], stdout, stderr + f"\n{why[1]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def _watch(proc, out, err, timeout_s: float, memory_limit_bytes: float | None, poll_s: float,
           output_limit_bytes: int) -> tuple[int, str] | None:
    """Wait for ``proc``; stop its tree at the first limit it passes, and say which (see :func:`run_watched`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            proc.wait(timeout=poll_s)
            return None
        except subprocess.TimeoutExpired:
            pass
        why = None
        if time.monotonic() > deadline:
            why = (124, f"timed out after {timeout_s:g} s")
        elif memory_limit_bytes and memory_bytes([proc.pid, *descendants(proc.pid)]) > memory_limit_bytes:
            why = (137, f"used more than {memory_limit_bytes / 2**30:g} GiB of memory")
        elif max(os.fstat(out.fileno()).st_size, os.fstat(err.fileno()).st_size) > output_limit_bytes:
            why = (125, f"wrote more than {output_limit_bytes / 2**20:g} MiB of output")
        if why:
            kill_tree(proc.pid)
            proc.wait()
            return why


def _tail(f, limit: int) -> str:
    """The last ``limit`` bytes of an output file, as text."""
    size = os.fstat(f.fileno()).st_size
    f.seek(max(0, size - limit))
    return f.read(limit).decode(errors="replace")
