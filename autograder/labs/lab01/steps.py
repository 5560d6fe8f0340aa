"""01_actor_scaling's kit steps (:mod:`autograder.routines`): the grader's armed emulated GPUs,
made on the reference process's side. Imported by both; they decide nothing (the checks do)."""

from __future__ import annotations

from course import fleet

from ...routines import connect, export, step
from ...stash import STASH
from . import instruments


@step
def armed_fleet(n: int, key_hex: str) -> list[str]:
    """``n`` armed emulated GPUs (:func:`~autograder.labs.lab01.instruments.armed`), as serialized
    actor handles.

    Only the reference process runs this: the grader forwards the handles to the kernel as
    opaque text (it never unpickles them); the kernel turns them back into handles. The
    fleet of an earlier session in this process is released first.
    """
    connect()
    fleet.release(STASH.held.get("armed", []))  # one armed fleet per process: a new session replaces the last one's
    gpus = instruments.armed(int(n), bytes.fromhex(key_hex))
    STASH.held["armed"] = gpus  # the handles in the kernel do not keep them alive; this process does
    return [export(a) for a in gpus]
