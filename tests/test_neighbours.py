"""A grading's neighbours on its machine (autograder.grader.isolation.neighbours): a tier a busy neighbour
may have cost is measured again with the other slots frozen, and a check a neighbour's hold
overlapped is run again. The freezing is tested on real control groups, the rules on stand-ins."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

import neighbours_measure
from autograder.grader.isolation import neighbours
from autograder.grader.isolation.neighbours import Neighbours, near_loss
from autograder.grader.session.session import Session
from notebooks import only_extended, sandboxed

SLOT_GRADING = """
import subprocess, sys
sys.stdin.readline()  # moved into the slot's group by now: what it starts is in it too
subprocess.Popen([sys.executable, "-c", "while True: pass"])
while True:
    pass
"""


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ran(pids: list[int], before: list[float], wait_s: float = 20.0) -> bool:
    """Whether every one of ``pids`` ran a few ticks past ``before`` (its CPU seconds) within
    ``wait_s``: thawed, on however busy a machine."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if all(_cpu_seconds(p) - b >= 0.05 for p, b in zip(pids, before)):
            return True
        time.sleep(0.1)
    return False


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.fixture
def neighbour(tmp_path):
    """Another slot's grading, as a grading slot's process records it: a spinning process and a
    spinning child it started, in a pausable control group named in slot 1's lock file; this
    test's own slot is slot 0."""
    from autograder.grader.isolation import cgroup

    group = cgroup.create(memory_bytes=None, processes=64, name="autograder-test-neighbour", pausable=True)
    if group is None or not cgroup.freezable(group.folders + group.sides):
        if os.environ.get("COURSE_KIT_REQUIRE_SANDBOX"):
            pytest.fail("COURSE_KIT_REQUIRE_SANDBOX is set, but this machine lets the grader make no freezer group")
        pytest.skip("this machine lets the grader make no freezer group")
    locks = tmp_path / "locks"
    locks.mkdir()
    own = locks / "slot-0-of-2.lock"
    own.write_text("")
    grading = subprocess.Popen([sys.executable, "-c", SLOT_GRADING], stdin=subprocess.PIPE, text=True)
    try:
        (locks / "slot-1-of-2.lock").write_text(json.dumps([str(f) for f in group.enter(grading.pid)]))
        grading.stdin.write("go\n")
        grading.stdin.flush()
        deadline = time.monotonic() + 10
        while not _children(grading.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        yield SimpleNamespace(locks=locks, mine=Neighbours((own,), locks), pids=[grading.pid, *_children(grading.pid)],
                              group=group, grading=grading)
    finally:
        grading.kill()
        group.close()
        grading.wait(10)


def test_near_loss_is_a_missed_tier_within_half_of_it():
    assert not near_loss(0.9, (0.5, 0.8))            # passed every tier
    assert near_loss(0.7, (0.5, 0.8))                # missed 0.8 by a little
    assert near_loss(0.3, (0.5, 0.8))                # missed both; within half of the lower one
    assert not near_loss(0.2, (0.5, 0.8))            # far below every tier: slow, not disturbed
    assert not near_loss(float("nan"), (0.5, 0.8))   # a measurement that failed is not measured again


def test_a_hold_freezes_every_process_of_the_other_slots_grading_and_thaws_it(neighbour):
    mine = neighbour.mine
    assert len(neighbour.pids) == 2 and mine.busy()
    with mine.held() as frozen:
        assert frozen == 1
        before = [_cpu_seconds(p) for p in neighbour.pids]
        time.sleep(1.0)
        during = [_cpu_seconds(p) - b for p, b in zip(neighbour.pids, before)]
    assert max(during) <= 0.02, during  # one tick of slack
    assert _ran(neighbour.pids, before)  # thawed: both run again
    assert not (neighbour.locks / neighbours.HOLDING).exists()
    (start, end, pid), = neighbours.holds(neighbour.locks)
    assert pid == os.getpid() and end - start >= 1.0


def test_a_slot_whose_grading_ended_is_not_busy(neighbour):
    assert neighbour.mine.busy()
    neighbour.grading.kill()
    for pid in neighbour.pids[1:]:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while neighbour.mine.busy() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not neighbour.mine.busy()


HOLDER = """
import sys, time
from pathlib import Path
from autograder.grader.isolation.neighbours import Neighbours
locks = Path(sys.argv[1])
with Neighbours((locks / "slot-2-of-3.lock",), locks).held():
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
print("done", flush=True)
"""


def _holder(locks: Path, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(locks), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_reading_that_overlapped_another_gradings_hold_is_disturbed(tmp_path):
    mine = Neighbours((tmp_path / "slot-0-of-3.lock",), tmp_path)
    before = time.monotonic()
    time.sleep(0.05)
    quiet_end = time.monotonic()
    holder = _holder(tmp_path, 0.5)
    assert mine.disturbed(before, time.monotonic())  # under way: disturbed already
    holder.communicate(timeout=30)
    after = time.monotonic()
    assert mine.disturbed(before, after)          # it overlapped the hold
    assert not mine.disturbed(before, quiet_end)  # it ended before the hold began
    assert not mine.disturbed(after, after + 1)   # it began after the hold ended
    with mine.held():                             # its own hold never disturbs it
        pass
    assert not mine.disturbed(after, time.monotonic())


def test_a_holder_that_dies_holding_is_thawed_by_the_slots_next_sweep(neighbour):
    from autograder.grader.isolation import cgroup
    from autograder.grader.engine import slots

    holder = _holder(neighbour.locks, 60)
    frozen = cgroup.freezable(json.loads((neighbour.locks / "slot-1-of-2.lock").read_text()))
    holder.kill()
    holder.wait(10)
    before = [_cpu_seconds(p) for p in neighbour.pids]
    time.sleep(0.5)
    assert [_cpu_seconds(p) for p in neighbour.pids] == before  # still frozen: its holder is gone
    slot = slots.claim(3, neighbour.locks)  # the dead holder's slot, claimed again (slot 0 of 3 here)
    try:
        slot.sweep()
    finally:
        slot.release()
    assert _ran(neighbour.pids, before), frozen
    assert not (neighbour.locks / neighbours.HOLDING).exists()


# --- the rules, on stand-ins ----------------------------------------------------------------------

@dataclass
class Stand:
    """Neighbours that are busy or not, count their holds, and disturb the first ``disturb`` readings."""

    busy_now: bool = True
    disturb: int = 0
    holds: int = 0
    holding: bool = False

    def busy(self) -> bool:
        return self.busy_now

    def held(self):
        import contextlib

        @contextlib.contextmanager
        def hold():
            self.holds += 1
            self.holding = True
            try:
                yield 1
            finally:
                self.holding = False
        return hold()

    def disturbed(self, start: float, end: float) -> bool:
        self.disturb -= 1
        return self.disturb >= 0


def _ratios(*values):
    seen, it = [], iter(values)

    def measure(session):
        seen.append(session.neighbours.holding if session.neighbours else None)
        return SimpleNamespace(ratio=next(it))
    return measure, seen


@pytest.mark.parametrize("first, busy, graded, holds", [
    (0.7, True, 0.9, 1),    # missed a tier by a little beside a busy slot: measured again, held; the second graded
    (0.9, True, 0.9, 0),    # passed: nothing to do
    (0.2, True, 0.2, 0),    # far below every tier: a slow submission, not a neighbour's doing
    (0.7, False, 0.7, 0),   # no other slot busy: nothing to hold
])
def test_a_tier_lost_near_the_line_beside_a_busy_slot_is_measured_again_held(first, busy, graded, holds):
    session = Session("00_measure", seed=1)
    session.neighbours = stand = Stand(busy_now=busy)
    measure, seen = _ratios(first, 0.9)
    assert session.tiered("batch-real", measure, (0.5, 0.8)).ratio == graded
    assert stand.holds == holds and seen == [False, True][:1 + holds]
    assert bool(session.held_notes) == bool(holds)


def test_outside_a_slot_a_tier_is_measured_once():
    session = Session("00_measure", seed=1)
    measure, seen = _ratios(0.7, 0.9)
    assert session.tiered("batch-real", measure, (0.5, 0.8)).ratio == 0.7 and seen == [None]


def _session_with(check_fn, stand) -> Session:
    session = Session("00_measure", seed=1)
    session.neighbours = stand
    session.checks = {"timed": SimpleNamespace(name="timed", fn=check_fn, points=2.0)}
    return session


@pytest.mark.parametrize("disturb, runs, held_last", [(0, 1, False), (1, 2, False), (5, 3, True)])
def test_a_check_a_neighbours_hold_overlapped_is_run_again_and_its_measurements_too(disturb, runs, held_last):
    """Disturbed once: run again, its memo measured again. Disturbed every time: the last run holds."""
    measured, holding = [], []

    def check(session):
        holding.append(session.neighbours.holding)
        session.memo("m", lambda: measured.append(1) or len(measured))

    stand = Stand(disturb=disturb)
    session = _session_with(check, stand)
    assert session.run("timed").passed
    assert len(holding) == runs and len(measured) == runs and holding[-1] is held_last
    assert len(session.held_notes) == min(disturb, 2)


def test_a_memo_measured_by_an_earlier_check_is_kept_when_a_later_one_is_run_again():
    measured = []
    stand = Stand(disturb=0)
    session = _session_with(lambda s: s.memo("m", lambda: measured.append(1)), stand)
    session.run("timed")
    session.checks["later"] = SimpleNamespace(name="later", fn=lambda s: s.memo("m", lambda: measured.append(1)),
                                              points=1.0)
    stand.disturb = 1
    session.run("later")
    assert len(measured) == 1  # measured before the later check began: not its measurement to redo


@pytest.mark.parametrize("timed, busy, passes_held, runs, graded", [
    (True, True, True, 2, True),      # lost beside a busy slot: run again held, and that run is graded
    (True, True, False, 2, False),    # lost again held: lost
    (True, False, True, 1, False),    # no other slot busy: its loss stands
    (False, True, True, 1, False),    # not a timed check: a neighbour cannot have cost it
])
def test_a_timed_check_lost_beside_a_busy_slot_is_run_again_held(timed, busy, passes_held, runs, graded):
    measured, holding = [], []

    def check(session):
        holding.append(session.neighbours.holding)
        session.memo("sweep", lambda: measured.append(session.neighbours.holding))
        assert session.neighbours.holding and passes_held, "slower than the grader's own timing"

    stand = Stand(busy_now=busy)
    session = _session_with(check, stand)
    session.checks["timed"].timed = timed
    assert session.run("timed").passed is graded
    assert holding == [False, True][:runs] and measured == holding  # what it read was measured again, held
    assert bool(session.held_notes) == (runs == 2)


# --- real gradings, side by side --------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.grading
@only_extended("the rules and the freezing are tested above on real control groups; the session notes report "
               "each lab's solution beside each kind of neighbour, from tests/neighbours_measure.py")
@pytest.mark.parametrize("kind", sorted(neighbours_measure.LOADS))
def test_lab00s_solution_keeps_full_marks_beside_a_hostile_neighbour(kind, tmp_path):
    """``grade --workers 2``: lab 00's solution and a neighbour loading the machine from its own
    slot (CPU, memory bandwidth, its work folder, process bursts) -- full marks for the solution."""
    if not sandboxed():
        pytest.skip("side by side needs the sandbox")
    got = neighbours_measure.one("00_measure", kind, 220, tmp_path)
    assert not got["lost"], got
