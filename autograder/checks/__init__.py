"""Grader-side checks, one module per lab, registered by lab id and check name.

A check raises ``AssertionError`` with a one-line reason when a target is missed. The
check's name is its hidden test cell's nbgrader ``grade_id`` without the ``test-`` prefix, so
the CLI's report, the gradebook and ``autograder.check()`` in a notebook all agree.

Two kinds, while the labs move behind the trust boundary (README, "How the grader measures"):

* **grader-side** (``@register(..., grader_side=True)``, or :func:`tiers`): the function takes
  the grading :class:`~autograder.session.Session` and reaches learner code only through
  ``session.learner.call(...)``. It runs in the grader's process; its hidden cell is
  ``autograder.grade("<name>")``, and its verdict is the grade whatever the kernel shows.
* **in-kernel** (labs not yet moved): the function takes the learner's objects by name and
  runs in the learner's kernel; its hidden cell calls it, and nbgrader's score is the grade.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Check:
    """One graded check: which lab, its name, its points, and the learner objects it takes."""

    lab: str
    name: str
    points: float
    fn: Callable
    grader_side: bool = False

    @property
    def params(self) -> list[str]:
        """The learner names an in-kernel check takes, in order (e.g. ``["throughput"]``)."""
        return [] if self.grader_side else list(inspect.signature(self.fn).parameters)

    @property
    def grade_id(self) -> str:
        return f"test-{self.name}"


REGISTRY: dict[str, dict[str, Check]] = {}


def register(lab: str, name: str, points: float, *, grader_side: bool = False):
    """Decorator: record a check function under ``lab`` and ``name``."""

    def wrap(fn):
        REGISTRY.setdefault(lab, {})[name] = Check(lab, name, points, fn, grader_side)
        return fn

    return wrap


def tiers(lab: str, names: tuple[str, ...], thresholds: tuple[float, ...], points: tuple[float, ...],
          measure: Callable, explain: Callable[[object, float], str]) -> None:
    """Register one grader-side check per tier of one measured ratio.

    ``measure(session)`` returns a result with a ``ratio`` (learner / reference, measured
    side by side); it runs once per grading run and every tier reads it. Tier ``i`` passes
    when ``ratio >= thresholds[i]``; otherwise it fails with ``explain(result, threshold)``.
    """

    def tier(threshold: float):
        def check(session):
            result = session.memo(measure, lambda: measure(session))
            if not result.ratio >= threshold:
                raise AssertionError(explain(result, threshold))

        return check

    for name, threshold, pts in zip(names, thresholds, points, strict=True):
        register(lab, name, pts, grader_side=True)(tier(threshold))


def module_for(lab: str) -> str:
    """The checks module of a lab id: ``00_measure`` -> ``autograder.checks.lab00``."""
    return f"{__name__}.lab{lab[:2]}"


def for_lab(lab: str) -> dict[str, Check]:
    """All checks of a lab, importing its module on first use."""
    try:
        importlib.import_module(module_for(lab))
    except ModuleNotFoundError as exc:
        raise KeyError(f"no checks for lab {lab!r}") from exc
    return REGISTRY.get(lab, {})


def needs_ray(lab: str) -> bool:
    """Whether a lab's checks use Ray (its module sets ``RAY = True``): then the grader starts
    the lab's Ray in its reference process and the learner's kernel joins it."""
    for_lab(lab)
    return bool(getattr(importlib.import_module(module_for(lab)), "RAY", False))


def ray_start(lab: str) -> str:
    """The kit step that starts a lab's Ray in the reference process (its module's ``RAY_START``;
    by default the fleet's resources on one node)."""
    for_lab(lab)
    return str(getattr(importlib.import_module(module_for(lab)), "RAY_START", "connect"))


def learner_names(lab: str) -> tuple[str, ...]:
    """The learner functions a lab's grader-side checks call (its module's ``LEARNER_NAMES``)."""
    for_lab(lab)
    return tuple(getattr(importlib.import_module(module_for(lab)), "LEARNER_NAMES", ()))
