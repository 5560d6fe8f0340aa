"""01_actor_scaling's kit steps (:mod:`autograder.kernel.routines`): the grader's armed emulated
GPUs, made on the reference process's side. Imported by both; they decide nothing (the checks
do)."""

from __future__ import annotations

from course import fleet

from ...kernel.routines import connect, export, step
from ...kernel.stash import STASH
from . import instruments


@step
def armed_fleet(n: int, key_hex: str) -> list[str]:
    """``n`` armed emulated GPUs (:func:`~autograder.labs.lab01.instruments.armed`), as serialized
    actor handles: the first ``n`` of this session's fleet, which grows to ``n`` where it is smaller.

    Only the reference process runs this: the grader forwards the handles to the kernel as
    opaque text (it never unpickles them); the kernel turns them back into handles. The
    fleet of an earlier session in this process (armed with another key) is released first.
    """
    connect()
    gpus = STASH.held.get("armed", [])
    if STASH.held.get("armed key") != key_hex:  # one armed fleet per process: a new session replaces the last one's
        fleet.release(gpus)
        gpus = []
    if len(gpus) < int(n):
        gpus = gpus + instruments.armed(int(n) - len(gpus), bytes.fromhex(key_hex))
    STASH.held["armed"], STASH.held["armed key"] = gpus, key_hex  # the kernel's handles do not keep them alive
    return [export(a) for a in gpus[:int(n)]]
