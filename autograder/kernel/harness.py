"""The kit's side of a kernel (or the reference process): learner code run under the grader's terms.

Imported (through ``import autograder``) in the locked first cell of every lab. Nothing here
decides a grade -- notebook code can replace any of it; the grader's verdicts come from its
own process (:mod:`autograder.grader.session.session`), which also uses the clocks captured here.

:func:`call` runs one piece of learner code with a deadline and turns whatever goes wrong
(an exception, ``NotImplementedError``, a hang, ``sys.exit``) into an ``AssertionError`` with
a one-line reason: that is what a hidden test cell shows, and what costs exactly that
cell's points and nothing more.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import sys
import threading

from .stash import STASH

_real_os_exit = os._exit
_real_os_kill = os.kill
_real_os_abort = os.abort


class Deadline(Exception):
    """Learner code ran past the time the grader allows it."""


@contextlib.contextmanager
def deadline(seconds: float):
    """Raise :class:`Deadline` in this (main) thread after ``seconds`` of wall time.

    Uses a real-time interval timer, which interrupts pure-Python loops and ``ray.get``.
    Off the main thread, or inside another deadline, it adds none; the nbgrader cell timeout
    remains the backstop.
    """
    if (STASH.armed or threading.current_thread() is not threading.main_thread()
            or not hasattr(signal, "setitimer")):
        yield  # inside another deadline, the outer one governs
        return

    def _expire(signum, frame):
        raise Deadline()

    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    STASH.armed = True
    try:
        yield
    finally:
        STASH.armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def armed() -> bool:
    """Whether a :func:`deadline` is running now (nested ones defer to it)."""
    return STASH.armed


def _key(fn):
    try:
        hash(fn)
        return fn
    except TypeError:
        return id(fn)


def timed_out(fn) -> bool:
    """Whether learner callable ``fn`` was already stopped once for running past its deadline."""
    return bool(STASH.timed_out.get(_key(fn)))


def short_repr(value, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, or the type's name if repr itself fails."""
    try:
        text = repr(value)
    except Exception:
        return f"a {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def memo(cache: dict, key, measure):
    """Run ``measure()`` once per key and remember the result -- or the AssertionError.

    Tiered checks share one measurement: each tier's cell calls this with the same key.
    """
    if key not in cache:
        try:
            cache[key] = measure()
        except AssertionError as exc:
            cache[key] = exc
    if isinstance(cache[key], AssertionError):
        raise cache[key]
    return cache[key]


def uncoloured(text: str) -> str:
    """``text`` without terminal colour codes (Ray colours its messages)."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _one_line(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)  # a Ray task's error: what the task raised, not Ray's header
    if isinstance(cause, BaseException) and cause is not exc:
        return f"{type(exc).__name__} from {_one_line(cause)}"
    text = uncoloured(str(exc)).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def call(fn, *args, what: str, timeout_s: float = 60.0, **kwargs):
    """Run learner code ``fn(*args, **kwargs)`` under the grader's terms.

    Its stderr is captured (nbgrader zeroes a graded cell that writes there), it is stopped
    after ``timeout_s`` seconds, and any failure becomes an ``AssertionError`` naming
    ``what`` and the reason in one line.
    """
    if not callable(fn):
        raise AssertionError(f"{what} is not defined as a function or class (got {type(fn).__name__})")
    if STASH.timed_out.get(_key(fn)):
        raise AssertionError(f"{what} was already stopped once for running past {STASH.timed_out[_key(fn)]:g} s; "
                             "not run again")
    try:
        with deadline(timeout_s), contextlib.redirect_stderr(io.StringIO()):
            return fn(*args, **kwargs)
    except KeyboardInterrupt:
        raise
    except NotImplementedError:
        raise AssertionError(f"{what} is not implemented yet (it raises NotImplementedError)") from None
    except Deadline:
        STASH.timed_out[_key(fn)] = timeout_s
        raise AssertionError(
            f"{what} did not finish within {timeout_s:g} s and was stopped by the grader"
        ) from None
    except SystemExit:
        raise AssertionError(f"{what} tried to exit the kernel (SystemExit); nothing was graded") from None
    except BaseException as exc:  # learner code may raise anything
        raise AssertionError(f"{what} raised {_one_line(exc)}") from None


def _from_learner(depth: int = 2) -> bool:
    """Whether the caller ``depth`` frames up is notebook code (not a library)."""
    try:
        filename = sys._getframe(depth).f_code.co_filename
    except ValueError:
        return False
    return filename.startswith("<") or "ipykernel_" in filename or filename.endswith(".ipynb")


def _refuse(name: str):
    raise SystemExit(f"{name} is disabled while the course kit is loaded (it would kill the kernel)")


def _guarded_os_exit(code=0):
    if _from_learner():
        _refuse("os._exit")
    _real_os_exit(code)


def _guarded_os_abort():
    if _from_learner():
        _refuse("os.abort")
    _real_os_abort()


def _guarded_os_kill(pid, sig):
    if pid in (0, os.getpid()) and _from_learner():
        _refuse("os.kill of the kernel")
    return _real_os_kill(pid, sig)


def guard_kernel() -> None:
    """Keep notebook code from ending the kernel process.

    ``exit()``/``quit()``, ``os._exit``, ``os.abort`` and ``os.kill`` of the kernel's own pid
    raise ``SystemExit`` instead (IPython reports it in the cell; the kernel lives on), so a
    submission that tries to exit loses that cell's points, not the rest of its grade.
    Library code is unaffected. Deliberately killing the process by other means still ends
    it; the cohort grader then records that submission as failed and moves on.
    """
    os._exit = _guarded_os_exit
    os.abort = _guarded_os_abort
    os.kill = _guarded_os_kill
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is not None:
        ip.ask_exit = lambda *a, **k: _refuse("exit()")  # exit() and quit() end up here
