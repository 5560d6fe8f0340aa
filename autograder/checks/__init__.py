"""The checks, registered by lab id and check name; each lab's are its folder's ``checks`` module.

A check takes the grading :class:`~autograder.grader.session.session.Session`, reaches learner code only
through ``session.learner.call(...)`` (and the reference through ``session.reference``), and
raises ``AssertionError`` with a one-line reason when a target is missed (and may return a
one-line note of what it measured when it passes, which the feedback shows). It runs in the
grader's process (docs/security/trust-boundary.md); its hidden test cell is
``autograder.grade("<name>")``, and its verdict is the grade whatever the kernel shows. The
check's name is that cell's nbgrader ``grade_id`` without the ``test-`` prefix, and its points
are that cell's nbgrader ``points`` (:mod:`autograder.checks.points`, the one place they are
written), so the CLI's report, the gradebook and ``autograder.check()`` in a notebook all agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import points as _points


@dataclass(frozen=True)
class Check:
    """One graded check: which lab, its name, and the function that runs it; its points are its
    test cell's."""

    lab: str
    name: str
    fn: Callable
    tiered: Tiered | None = None  # the measured ratio it is one tier of, if any (see :func:`tiers`)
    timed: bool = False  # graded on timings but not a tier: lost beside a busy slot, run again with it held

    @property
    def grade_id(self) -> str:
        return f"test-{self.name}"

    @property
    def points(self) -> float:
        """The points of its test cell ``test-<name>`` (nbgrader's metadata, :mod:`autograder.checks.points`)."""
        cells = _points.of(self.lab)
        if self.grade_id not in cells:
            raise LookupError(f"{self.lab}'s check {self.name!r} has no test cell {self.grade_id} in "
                              f"{_points.notebook(self.lab)}: its points are that cell's")
        return cells[self.grade_id]


REGISTRY: dict[str, dict[str, Check]] = {}


class InstructorOnly(Exception):
    """A check needs the reference implementations, and this install has none (a student
    bundle, ``python -m autograder release``): only the instructor's grading measures it."""


@dataclass(frozen=True)
class Tiered:
    """One measured ratio graded in tiers (see :func:`tiers`): what ``calibrate`` re-measures."""

    lab: str
    names: tuple[str, ...]
    thresholds: tuple[float, ...]
    measure: Callable

    @property
    def name(self) -> str:
        """The tiers' common name: ``batch-real`` for ``batch-real-tier1`` and ``-tier2``."""
        return self.names[0].rsplit("-tier", 1)[0]


def register(lab: str, name: str, tiered: Tiered | None = None, *, timed: bool = False):
    """Decorator: record a check function under ``lab`` and ``name`` (its points are its test
    cell's, ``test-<name>``), and the measured ratio it is a tier of, if any. ``timed``: its
    verdict rests on timings though it is no tier (a learner's measurement checked against the
    grader's, a model against a re-measurement): in a grading slot, one lost while another slot
    was busy is run again with that slot held
    (:meth:`autograder.grader.session.session.Session.run`)."""

    def wrap(fn):
        REGISTRY.setdefault(lab, {})[name] = Check(lab, name, fn, tiered, timed)
        return fn

    return wrap


def tiers(lab: str, names: tuple[str, ...], thresholds: tuple[float, ...], measure: Callable,
          explain: Callable[[object, float], str]) -> None:
    """Register one check per tier of one measured ratio.

    ``measure(session)`` returns a result with a ``ratio`` (learner / reference, measured
    side by side); it runs once per grading run and every tier reads it (in a grading slot, again
    with the other slots held when a neighbour may have cost a tier:
    :meth:`~autograder.grader.session.session.Session.tiered`). Tier ``i`` passes
    when ``ratio >= thresholds[i]``, and says the ratio it measured (a learner sees how far
    above the tier they are, not only that they passed); otherwise it fails with
    ``explain(result, threshold)``.
    """

    def tier(threshold: float):
        def check(session):
            result = session.memo(measure, lambda: session.tiered(measured.name, measure, thresholds))
            if not result.ratio >= threshold:
                raise AssertionError(explain(result, threshold))
            return f"measured {result.ratio:.2f}x the reference, side by side (this tier needs {threshold:g}x)"

        return check

    measured = Tiered(lab, tuple(names), tuple(thresholds), measure)
    for name, threshold in zip(names, thresholds, strict=True):
        register(lab, name, measured)(tier(threshold))
