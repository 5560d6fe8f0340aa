"""The other gradings on this machine, held still while a tier one of them may have cost is measured again.

A grading slot has cores of its own (:mod:`autograder.grader.engine.slots`), but not a memory bus, a
cache or a page cache of its own: on 2026-12-07 lab 00's solution lost ``batch-real-tier2``
beside a submission that wrote 2 GiB into its capped work folder, on its own core. So a tiered
ratio that a grading in a slot measured below a tier, but not far below
(:func:`near_loss`), while another slot of this machine was busy, is measured again with every
other slot's grading frozen (their control groups' freezers, :func:`autograder.grader.isolation.cgroup.freeze`),
and that measurement is the grade (:meth:`Neighbours.held`). Nothing of a frozen grading runs
then -- its kernel, its Ray, its reference, its nbgrader -- and it goes on where it was after.

A frozen grading's own clock ran on while it was frozen, so whatever it was timing then is
wrong: every hold is logged on this machine's monotonic clock (one clock for every process),
and a check whose run overlapped another grading's hold is run again (:meth:`Neighbours.disturbed`,
:meth:`autograder.grader.session.session.Session.run`). One hold at a time on a machine (a lock file), so
two gradings never freeze each other. A hold ends when the holder's measurement does; one whose
holder died is thawed by the next holder of that slot (:func:`thaw_stale`, from
:meth:`autograder.grader.engine.slots.Slot.sweep`).

Runs in a grading slot's grading process (``python -m autograder.grader.engine.slot_worker``), the
process that also runs the checks; a grading outside slots (``check``, serial ``grade``) has no
neighbours to hold.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from . import cgroup

NEAR = 0.5  # a ratio at least this fraction of the lowest tier it missed is measured again, held
HOLD_LOCK = "hold.lock"
HOLDING = "holding.json"  # while a hold lasts: its holder's pid and what it froze
HOLDS = "holds.log"  # every hold that ended: "start end pid", monotonic seconds
KEEP_S = 3600.0  # how long an ended hold stays in the log
SYNC_WAIT_S = 5.0  # at most this long for the frozen gradings' written pages to reach the disk


def near_loss(ratio: float, thresholds: tuple[float, ...]) -> bool:
    """Whether ``ratio`` missed a tier of ``thresholds`` by less than the factor :data:`NEAR`:
    what a neighbour's load could have cost. A ratio far below every tier (a slow or blank
    submission) is not measured again."""
    missed = [t for t in thresholds if not ratio >= t]
    return bool(missed) and ratio >= NEAR * min(missed)


@dataclass(frozen=True)
class Neighbours:
    """This grading's view of the other slots of its machine: ``own`` are its slot's lock files,
    ``locks`` the folder of every slot's (:data:`autograder.grader.engine.slots.LOCKS`)."""

    own: tuple[Path, ...]
    locks: Path

    def groups(self) -> list[Path]:
        """The freezable control groups of the other slots' gradings that have processes now."""
        out = []
        for path in sorted(self.locks.glob("slot-*.lock")):
            if path in self.own:
                continue
            out += [f for f in cgroup.freezable(_recorded(path)) if cgroup.has_processes(f)]
        return out

    def busy(self) -> bool:
        """Whether another slot of this machine is grading now."""
        return bool(self.groups())

    @contextlib.contextmanager
    def held(self) -> Iterator[int]:
        """Every other slot's grading frozen for the ``with`` block (waiting for another holder
        to end first); how many groups were frozen. Their dirty pages are written out first, at
        most :data:`SYNC_WAIT_S`, so that the disk is quiet too."""
        fd = os.open(self.locks / HOLD_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _thaw_recorded(self.locks)  # a holder that died holding left these frozen
            groups, start = self.groups(), time.monotonic()
            (self.locks / HOLDING).write_text(json.dumps({"pid": os.getpid(), "start": start,
                                                          "groups": [str(g) for g in groups]}))
            try:
                frozen = cgroup.freeze(groups)
                _sync(SYNC_WAIT_S)
                yield len(frozen)
            finally:
                _log(self.locks, start, time.monotonic())  # logged before the thaw: a thawed grading finds it
                cgroup.thaw(groups)
                (self.locks / HOLDING).unlink(missing_ok=True)
        finally:
            os.close(fd)  # the lock goes with it

    def disturbed(self, start: float, end: float) -> bool:
        """Whether another grading held this machine at some moment of ``start``..``end``
        (monotonic seconds): this grading may have been frozen then, its clock running on."""
        for held_from, held_to, pid in holds(self.locks):
            if pid != os.getpid() and held_from < end and held_to > start:
                return True
        try:
            now = json.loads((self.locks / HOLDING).read_text())
        except (OSError, ValueError):
            return False
        return now.get("pid") != os.getpid() and float(now.get("start", 0.0)) < end  # a hold under way


def holds(locks: Path) -> list[tuple[float, float, int]]:
    """The ended holds this machine logged: ``(start, end, holder pid)``."""
    out = []
    try:
        lines = (locks / HOLDS).read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            start, end, pid = line.split()
            out.append((float(start), float(end), int(pid)))
        except ValueError:  # a line cut by a holder killed while writing it
            continue
    return out


def thaw_stale(locks: Path) -> None:
    """Thaw what a holder that died holding left frozen (its ``holding`` record names its pid).
    A live holder's hold is left alone."""
    fd = os.open(locks / HOLD_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a live holder: it thaws its own
            return
        _thaw_recorded(locks)
    finally:
        os.close(fd)


def _thaw_recorded(locks: Path) -> None:
    """Thaw the groups a ``holding`` record names and remove it (the caller holds the hold lock,
    so its holder is gone)."""
    try:
        record = json.loads((locks / HOLDING).read_text())
    except (OSError, ValueError):
        return
    cgroup.thaw([Path(g) for g in record.get("groups", [])])
    (locks / HOLDING).unlink(missing_ok=True)


def _log(locks: Path, start: float, end: float) -> None:
    """Add one ended hold to the log, dropping those older than :data:`KEEP_S`."""
    kept = [f"{s:.6f} {e:.6f} {p}" for s, e, p in holds(locks) if e > end - KEEP_S]
    tmp = locks / f".{HOLDS}.{os.getpid()}"
    tmp.write_text("".join(f"{line}\n" for line in [*kept, f"{start:.6f} {end:.6f} {os.getpid()}"]))
    os.replace(tmp, locks / HOLDS)


def _recorded(path: Path) -> list[str]:
    """The control groups a slot's lock file records (:meth:`autograder.grader.engine.slots.Slot.hold`)."""
    try:
        return json.loads(path.read_text() or "[]")
    except (OSError, ValueError):
        return []


def _sync(wait_s: float) -> None:
    """``sync()`` in a thread, waited for at most ``wait_s``: the pages the frozen gradings wrote
    go to the disk now rather than during the measurement."""
    worker = threading.Thread(target=os.sync, daemon=True)
    worker.start()
    worker.join(wait_s)
