"""The grader's harness: learner failures become one-line AssertionErrors, clocks are its own."""

import sys
import time

import pytest

from autograder.kernel import harness


def test_not_implemented_is_named():
    def f():
        raise NotImplementedError()

    with pytest.raises(AssertionError, match=r"^f\(\) is not implemented yet"):
        harness.call(f, what="f()")


def test_exceptions_become_one_line_reasons():
    def f(x):
        raise ValueError("bad value\nsecond line")

    with pytest.raises(AssertionError) as info:
        harness.call(f, 1, what="f(x)")
    assert str(info.value) == "f(x) raised ValueError: bad value"


def test_hangs_are_stopped_by_the_deadline():
    def spin():
        while True:
            pass

    start = time.perf_counter()
    with pytest.raises(AssertionError, match=r"did not finish within 0.3 s"):
        harness.call(spin, what="spin()", timeout_s=0.3)
    assert time.perf_counter() - start < 2
    start = time.perf_counter()
    with pytest.raises(AssertionError, match=r"already stopped once"):
        harness.call(spin, what="spin()", timeout_s=0.3)  # not run (and waited for) again
    assert time.perf_counter() - start < 0.1


def test_exit_is_caught():
    with pytest.raises(AssertionError, match="tried to exit"):
        harness.call(sys.exit, 3, what="sys.exit")


def test_not_callable():
    with pytest.raises(AssertionError, match="is not defined as a function"):
        harness.call(42, what="throughput")


def test_learner_stderr_is_captured(capfd):
    def noisy():
        print("warning!", file=sys.stderr)
        return 7

    assert harness.call(noisy, what="noisy()") == 7
    assert "warning!" not in capfd.readouterr().err


def test_guard_refuses_exits_from_notebook_code_only(monkeypatch):
    import os

    for name in ("_exit", "abort", "kill"):
        monkeypatch.setattr(os, name, getattr(os, name))
    harness.guard_kernel()
    learner = compile("import os\nos._exit(1)", "/tmp/ipykernel_1/123.py", "exec")
    with pytest.raises(SystemExit, match="os._exit is disabled"):
        exec(learner, {})
    kill = compile("import os\nos.kill(os.getpid(), 9)", "/tmp/ipykernel_1/124.py", "exec")
    with pytest.raises(SystemExit, match="os.kill of the kernel is disabled"):
        exec(kill, {})
    os.kill(os.getpid(), 0)  # library code (this test file) still reaches the real os.kill


def test_memo_measures_once_and_remembers_failures():
    calls = []

    def measure():
        calls.append(1)
        return 42

    cache = {}
    assert harness.memo(cache, "k", measure) == harness.memo(cache, "k", measure) == 42
    assert len(calls) == 1

    def broken():
        calls.append(1)
        raise AssertionError("too slow")

    for _ in range(2):
        with pytest.raises(AssertionError, match="too slow"):
            harness.memo(cache, "b", broken)
    assert len(calls) == 2
