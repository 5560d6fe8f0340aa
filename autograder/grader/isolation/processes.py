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
import contextvars
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
OUTPUT_LIMIT_BYTES = 64 * 2**20  # what a graded process may write to stdout or stderr
# ``python -P`` (3.11+): no working folder first on sys.path, where a submission could plant a
# module that a grader process started later (or importing lazily) would run.
SAFE_PATH = ["-P"] if sys.version_info >= (3, 11) else []


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
RAISE_AGAIN_AFTER_S = 10.0  # a second stop signal this soon after the first leaves the clean-up alone
# The section of the main thread that takes a stop at its own safe points (see :func:`shielded`).
_SHIELD: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("autograder_shield", default=None)


@contextlib.contextmanager
def sigterm_as_ctrl_c():
    """SIGTERM (``kill``, a hub stopping its service, a CI timeout) and Ctrl-C end a command the
    same way: as a ``KeyboardInterrupt`` whose ``finally`` blocks end what it started -- the
    ``nbgrader autograde`` of a submission, the reference process, the sandboxes -- instead of
    leaving them running, orphaned.

    Where the interrupt lands must not matter, so it never lands where it could break the
    clean-up: inside a :func:`shielded` section (waiting on a child) the signal only sets a flag
    that the section's loop acts on at a safe point, and a second signal within
    :data:`RAISE_AGAIN_AFTER_S` of the first is not raised again (it would cut the clean-up the
    first one started). (Seen 2026-12-07: an interrupt raised inside ``Popen.wait`` left its
    lock held, and the clean-up's untimed ``wait()`` then hung for ever.)"""
    raised_at: list[float] = []

    def stop(*_args) -> None:
        shield = _SHIELD.get()
        if shield is not None:
            shield.set()
        elif not raised_at or time.monotonic() - raised_at[-1] > RAISE_AGAIN_AFTER_S:
            raised_at.append(time.monotonic())
            raise KeyboardInterrupt

    try:
        previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    except ValueError:  # not the main thread (a caller embedding the grader): signals are its business
        yield
        return
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def own_stop_handlers():
    """Keep this process's SIGTERM and Ctrl-C handlers across the ``with`` block: ``ray.init``
    in a driver replaces SIGTERM's with one that calls ``sys.exit`` (Ray's ``worker.py``), which
    skips :func:`sigterm_as_ctrl_c`'s clean-up path and its exit code; a SIGTERM that lands while
    that handler is in place (inside ``ray.init``) leaves the block as a ``KeyboardInterrupt``,
    as it would have without it. (Found 2026-12-07: ``grade --workers 2`` and ``serve --workers
    2`` stopped by SIGTERM exited with code 15 and no "interrupted".)"""
    try:
        kept = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    except ValueError:
        kept = {}
    try:
        yield
    except SystemExit as exc:
        if exc.code == signal.SIGTERM and kept:
            raise KeyboardInterrupt from exc
        raise
    finally:
        for sig, handler in kept.items():
            if handler is not None:
                try:
                    signal.signal(sig, handler)
                except ValueError:  # not the main thread: signals are its caller's business
                    pass


@contextlib.contextmanager
def shielded():
    """A section that takes a stop at its own safe points: a stop signal arriving inside it sets
    the event yielded (the section's loop checks it) instead of raising wherever the main thread
    is; leaving the section with the event set raises the ``KeyboardInterrupt`` then."""
    outer = _SHIELD.get()
    event = threading.Event()
    if outer is not None and outer.is_set():
        event.set()
    token = _SHIELD.set(event)
    try:
        yield event
    finally:
        _SHIELD.reset(token)
        if event.is_set():
            if outer is not None:
                outer.set()
            else:
                raise KeyboardInterrupt


def reap(proc: subprocess.Popen, timeout_s: float) -> int | None:
    """Wait at most ``timeout_s`` for ``proc`` to exit and collect it; its exit code, or ``None``
    if it is still running. Unlike ``Popen.wait`` this does not take ``Popen``'s private lock,
    which an interrupt raised inside another wait can leave held for ever."""
    deadline = time.monotonic() + timeout_s
    while proc.returncode is None:
        try:
            pid, status = os.waitpid(proc.pid, os.WNOHANG)
        except ChildProcessError:  # collected elsewhere (a subreaper's sweep): gone, status unknown
            proc.returncode = -signal.SIGKILL
            break
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)
    return proc.returncode


def end(proc: subprocess.Popen, grace_s: float = 0.0, timeout_s: float = 10.0) -> int | None:
    """Stop ``proc`` and everything it started, and collect it within ``timeout_s``: SIGTERM
    first where ``grace_s`` lets it end what it started itself, then SIGKILL of its whole tree."""
    if proc.returncode is not None:  # collected already: its pid may be another process's now
        return proc.returncode
    if grace_s and proc.returncode is None:
        try:
            proc.terminate()
        except OSError:
            pass
        if reap(proc, grace_s) is not None:
            return proc.returncode
    kill_tree(proc.pid)
    return reap(proc, timeout_s)


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


def ray_descendants() -> list[int]:
    """This process's live descendants that are Ray's own processes (a local Ray it started)."""
    return [p for p in descendants() if not _zombie(p) and not not_ray([_command(p)])]


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
        proc = None
        try:
            with shielded() as stop:  # a stop from here on is taken by _watch, the child never left behind
                proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
                why = _watch(proc, out, err, timeout_s, memory_limit_bytes, poll_s, output_limit_bytes, stop)
        except BaseException:  # the grader itself is stopped (Ctrl-C, SIGTERM): the command goes with it
            if proc is not None:
                end(proc)
            raise
        stdout, stderr = _tail(out, output_limit_bytes), _tail(err, output_limit_bytes)
    if why:
        return subprocess.CompletedProcess(cmd, why[0], stdout, stderr + f"\n{why[1]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def _watch(proc, out, err, timeout_s: float, memory_limit_bytes: float | None, poll_s: float,
           output_limit_bytes: int, stop: threading.Event) -> tuple[int, str] | None:
    """Wait for ``proc``; stop its tree at the first limit it passes, and say which (see
    :func:`run_watched`); on ``stop`` (the grader is stopped), stop its tree and return."""
    deadline = time.monotonic() + timeout_s
    while True:
        if reap(proc, poll_s) is not None:
            return None
        if stop.is_set():
            end(proc)
            return (130, "stopped: the grader was interrupted")
        why = None
        if time.monotonic() > deadline:
            why = (124, f"timed out after {timeout_s:g} s")
        elif memory_limit_bytes and memory_bytes([proc.pid, *descendants(proc.pid)]) > memory_limit_bytes:
            why = (137, f"used more than {memory_limit_bytes / 2**30:g} GiB of memory")
        elif max(os.fstat(out.fileno()).st_size, os.fstat(err.fileno()).st_size) > output_limit_bytes:
            why = (125, f"wrote more than {output_limit_bytes / 2**20:g} MiB of output")
        if why:
            end(proc)
            return why


def _tail(f, limit: int) -> str:
    """The last ``limit`` bytes of an output file, as text."""
    size = os.fstat(f.fileno()).st_size
    f.seek(max(0, size - limit))
    return f.read(limit).decode(errors="replace")
