"""Stopping a submission's process tree: past its time, or past its memory cap, with the reason."""

from __future__ import annotations

import os
import sys
import time

import pytest

from autograder.grader.isolation import processes

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


STOPPED = """
import subprocess, sys
from autograder.grader.isolation import processes
with processes.sigterm_as_ctrl_c():
    print("ready", flush=True)
    try:
        processes.run_watched([sys.executable, "-c", "import time; time.sleep(60)"], cwd=".", env={},
                              timeout_s=60, poll_s=0.001)
    except KeyboardInterrupt:
        print("stopped", flush=True)
        sys.exit(130)
"""


def test_a_stop_at_any_moment_of_a_watched_wait_ends_the_command_and_its_child():
    """SIGTERM at many moments of ``run_watched``'s polling (a 1 ms poll, so the signal often
    lands inside ``Popen``'s own wait): the command exits within seconds, its child with it.
    (Seen 2026-12-07: one that landed between ``Popen``'s lock and its ``try`` hung the clean-up.)"""
    import random
    import signal
    import subprocess

    rng = random.Random(54)
    for k in range(30):
        proc = subprocess.Popen([sys.executable, "-c", STOPPED], stdout=subprocess.PIPE, text=True,
                                cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        assert proc.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.05, 0.2))  # inside the watch loop
        before = processes.descendants(proc.pid)
        for _ in range(rng.choice((1, 1, 3))):  # a second and third SIGTERM must not cut the clean-up
            proc.send_signal(signal.SIGTERM)
            time.sleep(rng.uniform(0, 0.01))
        out, _ = proc.communicate(timeout=10)
        # clean-up done (a SIGTERM landing after it, once the handler is gone, may end it instead of exit)
        assert out == "stopped\n" and proc.returncode in (130, -signal.SIGTERM), (k, proc.returncode, out)
        assert not [p for p in before if not processes._zombie(p)], f"run {k}: its child outlived it"


def test_a_library_that_replaces_the_stop_handlers_inside_own_stop_handlers_does_not_keep_them():
    """``ray.init`` in a driver sets a SIGTERM handler of its own (``sys.exit``), which would end
    ``grade --workers`` without its clean-up: the grader's handlers are put back after it."""
    import signal

    with processes.sigterm_as_ctrl_c():
        ours = signal.getsignal(signal.SIGTERM)
        with processes.own_stop_handlers():
            signal.signal(signal.SIGTERM, lambda *a: sys.exit(signal.SIGTERM))  # as ray.init does
        assert signal.getsignal(signal.SIGTERM) is ours
        with pytest.raises(KeyboardInterrupt):  # a SIGTERM inside ray.init: stopped as Ctrl-C stops it
            with processes.own_stop_handlers():
                signal.signal(signal.SIGTERM, lambda *a: sys.exit(signal.SIGTERM))
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1)
        assert signal.getsignal(signal.SIGTERM) is ours
