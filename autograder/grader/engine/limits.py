"""What one grading may take, set once by the command that grades (``grade``, ``serve``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..nbgrading.nbgrader_run import DEFAULT_CELL_TIMEOUT_S, DEFAULT_MEMORY_LIMIT_GIB, DEFAULT_SUBMISSION_TIMEOUT_S


@dataclass(frozen=True)
class Limits:
    """One grading's limits and whether it runs sandboxed: plain data, the same for every
    submission of a run, and part of each grade's fingerprint (:func:`autograder.grader.engine.resume.fingerprint`:
    other limits, another grade)."""

    cell_timeout_s: float = DEFAULT_CELL_TIMEOUT_S
    timeout_s: float = DEFAULT_SUBMISSION_TIMEOUT_S
    memory_limit_gib: float | None = DEFAULT_MEMORY_LIMIT_GIB
    sandboxed: bool = True

    def args(self) -> dict:
        """As :func:`autograder.grader.nbgrading.nbgrader_run.autograde`'s keyword arguments."""
        return asdict(self)
