"""Stopping a submission's process tree: past its time, or past its memory cap, with the reason."""

from __future__ import annotations

import os
import sys
import time

import pytest

from autograder.grader import processes

BOMB = """
import os, subprocess, sys, time
# a child that grows too: the cap is on the whole tree
subprocess.Popen([sys.executable, "-c", "x = bytearray(200 * 2**20); import time; time.sleep(60)"])
chunks = []
for _ in range(100):
    chunks.append(bytearray(50 * 2**20))  # 50 MiB more every 50 ms, touched
    time.sleep(0.05)
print("never got here")
"""


def test_a_memory_bomb_is_stopped_with_its_reason_and_nothing_of_it_survives():
    start = time.monotonic()
    before = processes.descendants()
    proc = processes.run_watched([sys.executable, "-c", BOMB], cwd=".", env=dict(os.environ), timeout_s=60,
                                 memory_limit_bytes=0.5 * 2**30, poll_s=0.2)
    assert proc.returncode == 137 and proc.stderr.splitlines()[-1] == "used more than 0.5 GiB of memory"
    assert "never got here" not in proc.stdout and time.monotonic() - start < 20
    time.sleep(0.5)
    assert not {p for p in processes.descendants() - before if not processes._zombie(p)}


def test_a_hang_is_stopped_at_its_deadline_and_output_is_kept():
    proc = processes.run_watched([sys.executable, "-c", "print('started', flush=True)\nimport time\ntime.sleep(60)"],
                                 cwd=".", env=dict(os.environ), timeout_s=1.5, poll_s=0.2)
    assert proc.returncode == 124 and "started" in proc.stdout and proc.stderr.endswith("timed out after 1.5 s")


def test_an_ordinary_run_is_untouched():
    proc = processes.run_watched([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
                                 cwd=".", env=dict(os.environ), timeout_s=30, memory_limit_bytes=2**30)
    assert (proc.returncode, proc.stdout.strip(), proc.stderr.strip()) == (3, "out", "err")
    assert processes.memory_bytes([os.getpid()]) > 10 * 2**20  # this interpreter, at least


def test_endless_output_is_stopped_and_never_held_in_memory():
    """A kernel inherits nbgrader's stdout and stderr: output goes to files, a tree that writes
    more than the limit is stopped (return code 125), and only the limit's tail comes back."""
    flood = "import sys\nwhile True: sys.stderr.write('x' * 65536)"
    proc = processes.run_watched([sys.executable, "-c", flood], cwd=".", env=dict(os.environ), timeout_s=60,
                                 poll_s=0.1, output_limit_bytes=2**20)
    assert proc.returncode == 125 and proc.stderr.splitlines()[-1] == "wrote more than 1 MiB of output"
    assert len(proc.stderr) < 2**20 + 100


def _marked(token: str) -> list[str]:
    """The command lines of live processes whose environment holds ``token``."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    if token.encode() in f.read() and not processes._zombie(int(entry.name)):
                        found.append(processes._command(int(entry.name)))
            except OSError:
                pass
    return found


@pytest.mark.slow
@pytest.mark.grading
def test_check_stopped_by_sigterm_takes_its_grading_with_it(tmp_path):
    """``kill`` of a running ``check`` (a CI timeout, a hub stopping a service) ends it as Ctrl-C
    does: exit code 130, and by the time it exits its ``nbgrader autograde``, the learner's kernel
    and the grader's processes are ended by its own clean-up. (Seen 2026-12-07: an ``nbgrader
    autograde`` and a reference process ran on after a killed ``check``; with lab 00 here they
    also die within a second without the clean-up, so what fails without it is the exit code.)"""
    import secrets
    import subprocess

    from notebooks import ROOT, sandboxed, solution

    token = f"CK_SIGTERM_{secrets.token_hex(4)}"
    argv = [sys.executable, "-m", "autograder", "check", str(solution("00_measure"))]
    proc = subprocess.Popen(argv + ([] if sandboxed() else ["--unsandboxed"]), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, token: "1"})
    deadline = time.monotonic() + 120
    while not all(any(part in c for c in _marked(token)) for part in ("nbgrader autograde", "ipykernel_launcher")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0][-2000:]
        time.sleep(0.2)  # until the learner's kernel runs (inside its sandbox, where one is made)
    time.sleep(2)
    proc.terminate()
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in out, out[-2000:]
    deadline = time.monotonic() + 1  # ended by check itself before it exits, not winding down on their own
    while left := _marked(token):
        assert time.monotonic() < deadline, f"still running after check was stopped: {left}"
        time.sleep(0.5)
