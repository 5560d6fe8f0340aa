"""Grader-side checks, one module per lab, registered by lab id and check name.

A check is a plain function that takes the learner's objects (a function, an actor class),
runs them under the grader's harness, measures, and raises ``AssertionError`` with a
one-line reason when a target is missed. A hidden test cell calls exactly one check, and
the check's name is the cell's nbgrader ``grade_id`` without its ``test-`` prefix, so the
CLI's report, the gradebook and ``autograder.check()`` in a notebook all agree.
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

    @property
    def params(self) -> list[str]:
        """The learner names the check takes, in order (e.g. ``["throughput"]``)."""
        return list(inspect.signature(self.fn).parameters)

    @property
    def grade_id(self) -> str:
        return f"test-{self.name}"


REGISTRY: dict[str, dict[str, Check]] = {}


def register(lab: str, name: str, points: float):
    """Decorator: record a check function under ``lab`` and ``name``."""

    def wrap(fn):
        REGISTRY.setdefault(lab, {})[name] = Check(lab, name, points, fn)
        return fn

    return wrap


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
