"""Stopping ``check``, ``grade`` and ``serve`` at any moment (``kill``, a hub stopping its
service, a CI timeout): each exits within seconds, as Ctrl-C would end it, and nothing it
started -- ``nbgrader autograde``, the learner's kernel, the reference process, the sandboxes,
a local Ray -- runs on after it.

Seen 2026-12-07: a SIGTERM raised inside ``Popen.wait`` left that ``Popen``'s lock held, and
``check``'s clean-up then waited on it for ever. The moments are drawn at random (the seed is
printed, so a failure can be replayed with ``COURSE_KIT_STOP_SEED``); the default set stops each
command at one moment, the extended set at a few dozen."""

from __future__ import annotations

import os
import random
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.grader.isolation import processes
from notebooks import ROOT, extended, make_course, sandboxed, solution, submit

LAB = "00_measure"
STOP_WITHIN_S = 20  # from SIGTERM to exit: the reference's own Ray takes a few seconds to stop
GONE_WITHIN_S = 1   # from exit to nothing left: ended by the command itself, not winding down alone
# Stops are drawn from a command's first seconds: the default set's from its start-up and first
# cells, the extended set's from all of a lab 00 grading (about a minute).
LATEST_S, LATEST_EXTENDED_S = 25, 70


def _marked(token: str) -> dict[int, str]:
    """pid -> command line of each live process whose environment holds ``token``."""
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    if token.encode() in f.read() and not processes._zombie(int(entry.name)):
                        found[int(entry.name)] = processes._command(int(entry.name))
            except OSError:
                pass
    return found


def _stop_at(argv: list[str], delay_s: float, cwd: Path) -> str:
    """Run ``python -m autograder ARGV``, SIGTERM it ``delay_s`` seconds in, and assert it exits
    within :data:`STOP_WITHIN_S` -- as stopped, or having finished first -- with none of its
    processes left :data:`GONE_WITHIN_S` later; what it printed."""
    token = f"CK_STOP_{secrets.token_hex(4)}"
    sandbox = [] if sandboxed() else ["--unsandboxed"]
    proc = subprocess.Popen([sys.executable, "-m", "autograder", *argv, *sandbox], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, token: "1"})
    try:
        finished = proc.wait(delay_s) is not None
    except subprocess.TimeoutExpired:
        finished = False
        proc.send_signal(signal.SIGTERM)
    stopped_at = time.monotonic()
    try:
        out, _ = proc.communicate(timeout=STOP_WITHIN_S)
    except subprocess.TimeoutExpired:
        processes.kill_tree(proc.pid)
        out, _ = proc.communicate()
        pytest.fail(f"{argv[0]} still running {STOP_WITHIN_S} s after SIGTERM at {delay_s:.1f} s: {out[-2000:]}")
    took = time.monotonic() - stopped_at
    if not finished:
        assert proc.returncode in (0, 130) and ("interrupted" in out or "stopped" in out), \
            f"exit code {proc.returncode}: {out[-2000:]}"
    deadline = time.monotonic() + GONE_WITHIN_S
    while left := _marked(token):
        if time.monotonic() > deadline:
            for pid in left:  # ended here, so that one failure does not spoil the next run
                processes.kill_tree(pid)
            pytest.fail(f"still running after {argv[0]} was stopped at {delay_s:.1f} s: {sorted(left.values())}")
        time.sleep(0.1)
    print(f"{argv[0]} stopped at {delay_s:.1f} s: exited in {took:.1f} s"
          + (" (it had finished)" if finished else ""))
    return out


def _moments(n: int, latest_s: float) -> list[float]:
    """``n`` seconds drawn from ``[0.5, latest_s]``, seeded (printed; ``COURSE_KIT_STOP_SEED``)."""
    seed = int(os.environ.get("COURSE_KIT_STOP_SEED") or secrets.randbelow(10**6))
    print(f"stop moments seeded with COURSE_KIT_STOP_SEED={seed}")
    rng = random.Random(seed)
    return [round(rng.uniform(0.5, latest_s), 1) for _ in range(n)]


def _graded_course(tmp: Path) -> Path:
    """A course holding one submission of lab 00 (its solution), for ``grade``."""
    course = make_course(tmp, [LAB])
    submit(course, "ann", LAB, solution(LAB))
    return course


def _served_course(tmp: Path) -> Path:
    """A course whose exchange holds ann's submission of lab 00 (its solution), for ``serve``:
    released, fetched and submitted with nbgrader's own commands."""
    course = make_course(tmp / "course", [LAB])
    root = tmp / "exchange"
    root.mkdir()
    root.chmod(0o777)
    with open(course / "nbgrader_config.py", "a") as f:
        f.write(f"\nc.CourseDirectory.course_id = 'kit101'\nc.Exchange.root = {str(root)!r}\n"
                "c.CollectApp.check_owner = False  # the test's student is not a Unix user\n")
    home = tmp / "ann"
    home.mkdir()
    mine = [f"--Exchange.root={root}", "--course=kit101", f"--Exchange.cache={home / '.cache'}", "--student=ann"]
    for args, cwd in ((["generate_assignment", LAB], course), (["db", "student", "add", "ann"], course),
                      (["release_assignment", LAB], course), (["fetch_assignment", LAB, *mine], home),
                      (["submit", LAB, *mine], home)):
        subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, check=True, capture_output=True,
                       timeout=300)
    return course


def _stop_each(kinds: list[str], n: int, latest_s: float, tmp: Path) -> None:
    """Stop each command of ``kinds`` at ``n`` random moments of its first ``latest_s`` seconds."""
    for k, delay in enumerate(_moments(n * len(kinds), latest_s)):
        kind = kinds[k % len(kinds)]
        here = tmp / f"run{k}"
        here.mkdir()
        if kind == "check":
            _stop_at(["check", str(solution(LAB))], delay, ROOT)
        elif kind.startswith("grade"):
            workers = ["--workers", "2", "--uncalibrated"] if kind == "grade-workers" else []
            _stop_at(["grade", str(_graded_course(here)), LAB, *workers], delay, ROOT)
        else:
            workers = ["--workers", "2", "--uncalibrated"] if kind == "serve-workers" else []
            _stop_at(["serve", str(_served_course(here)), "--poll", "1", *workers], delay, ROOT)


@pytest.mark.slow
@pytest.mark.grading
def test_check_grade_and_serve_stopped_at_random_moments_end_everything_they_started(tmp_path):
    """The default set: each command stopped at one random moment."""
    _stop_each(["check", "grade", "serve"], 1, LATEST_S, tmp_path)


@pytest.mark.slow
@pytest.mark.grading
@pytest.mark.skipif(not extended(), reason="the extended set: COURSE_KIT_EXTENDED=1 (CI: three random stops)")
def test_many_stops_at_random_moments_end_everything(tmp_path):
    """The extended set: a few dozen stops, ``grade`` and ``serve --workers 2`` (a Ray in the
    grader's own process, which sets a SIGTERM handler of its own) among them."""
    _stop_each(["check", "grade", "serve", "grade-workers", "serve-workers"], 6, LATEST_EXTENDED_S, tmp_path)
