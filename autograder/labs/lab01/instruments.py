"""01_actor_scaling's instruments: the grader's armed emulated GPUs (see :mod:`autograder.labs.instruments`).

:func:`armed` is the grader's own fleet (:class:`ArmedGPU`): its GPUs run only jobs the grader
sealed (:func:`seal`) and answer with receipts (:func:`receipt`) no driver can forge, so the
grader knows from results alone that every job ran on a GPU for its full duration. They are the
lesson's emulated GPUs (:class:`course.fleet.EmulatedGPU`) with a key, on the grader's own
resource (:data:`course.fleet.GRADER_RESOURCE`).
"""

from __future__ import annotations

import hashlib
import hmac

import ray

from course import fleet

from ..instruments import ClosedActor


def seal(key: bytes, token: int, seconds: float) -> str:
    """The grader's seal on a job: an armed emulated GPU runs only jobs whose seal matches, so
    a driver cannot shorten a job's kernel (``dataclasses.replace(job, seconds=0)``)."""
    return hmac.new(key, f"job:{int(token)}:{float(seconds)!r}".encode(), hashlib.sha256).hexdigest()[:32]


def receipt(key: bytes, token: int) -> int:
    """What an armed emulated GPU returns for a job it ran: only it (and the grader) can make it."""
    return int(hmac.new(key, f"done:{int(token)}".encode(), hashlib.sha256).hexdigest()[:15], 16)


class ArmedGPU(fleet.EmulatedGPU, ClosedActor):
    """A grader's emulated GPU: runs only jobs the grader sealed, answers with receipts.

    Armed once with the grader's key (:meth:`arm`; whoever arms it first keeps it). It refuses
    a job without the grader's :func:`seal` -- a shortened or invented one -- and returns a
    :func:`receipt` instead of the token, so a result can only come from a job this GPU really
    ran for as long as the job asked. A :class:`~autograder.labs.instruments.ClosedActor`: no
    ``__ray_call__``.
    """

    def __init__(self):
        super().__init__()
        self._key: bytes | None = None

    def arm(self, key_hex: str) -> None:
        if self._key is not None:
            raise RuntimeError("this emulated GPU is already armed")
        self._key = bytes.fromhex(key_hex)

    def process(self, job):
        if self._key is None or not hmac.compare_digest(str(job.seal), seal(self._key, job.token, job.seconds)):
            raise ValueError(f"job {job.index} was changed after the grader made it (its seal does not match)")
        self._sleep(job.seconds)
        return receipt(self._key, job.token)


def armed(n: int, key: bytes, *, timeout_s: float = 120.0) -> list:
    """``n`` emulated GPUs for a grader, armed with ``key`` before anyone else holds them.

    They use the grader's own resource (:data:`course.fleet.GRADER_RESOURCE`), so the GPUs a
    notebook holds cannot keep them from starting.
    """
    actors = fleet.start_actors(ArmedGPU, n, options={"num_cpus": 0, "num_gpus": 0,
                                                        "resources": {fleet.GRADER_RESOURCE: 1}}, timeout_s=timeout_s)
    ray.get([a.arm.remote(key.hex()) for a in actors], timeout=timeout_s)
    return actors
