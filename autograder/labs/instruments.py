"""What the grader's own Ray actors share: they are closed to the learner code they are handed to.

Each lab's instruments -- the Ray actors the grader makes in the lab's Ray and hands to learner
code -- live with that lab's grading, in ``autograder/labs/lab<NN>/instruments.py``: lab 01's
armed emulated GPUs, lab 02's probe and ledger, lab 04's shard store and host batch. The lab's
kit steps make them in the reference process; Ray's workers import them from there. They are
the grader's, not the learner's runtime (``course/``), and, like the rest of
:mod:`autograder.labs`, they import nothing of the grader's side.
"""

from __future__ import annotations

import ray


class _NoExtras(type):
    """Ray adds its extra methods to an actor class unless the class already has
    ``__ray_actor_class__``; kept on the metaclass, it stays out of the class body (which Ray
    disassembles to identify the class)."""

    @property
    def __ray_actor_class__(cls):
        return cls


class ClosedActor(metaclass=_NoExtras):
    """Base class for actors a grader hands to learner code (its emulated GPUs, probe, ledger, shards).

    Ray gives every actor ``__ray_call__``, which runs any function a caller sends *inside*
    the actor -- one line would read a grader's key or rewrite its records. An actor built on
    this class has only the methods it defines, plus the two Ray itself needs.
    """

    def __ray_ready__(self):
        return True

    def __ray_terminate__(self):
        ray.actor.exit_actor()

