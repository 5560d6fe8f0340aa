"""Where each lab's targets live, and the one limit every lab shares.

A lab's targets are its folder's ``targets.py`` (``autograder/labs/labNN/targets.py``, one
frozen ``Targets`` each). Throughput targets are ratios to a reference measured side by side
in the same run (interleaved, median), never seconds; correctness, locality and completion
targets are fractions and counts. A tiered goal lists its tiers; each tier is one graded
cell. Time limits bound how long the grader lets learner code run (they are safety limits,
not targets).
"""

from __future__ import annotations

import importlib
import os

from .labs import module_name, spec


def call_timeout_s() -> float:
    """The longest the grader lets one call of learner code run, read when a grading run starts.

    A safety limit, not a target; instructors (and the test suite) may lower it with
    ``AUTOGRADER_CALL_TIMEOUT_S``.
    """
    return float(os.environ.get("AUTOGRADER_CALL_TIMEOUT_S", "60"))


def for_lab(lab: str):
    """``lab``'s targets (its folder's ``targets.TARGETS``)."""
    spec(lab)
    return importlib.import_module(module_name(lab, "targets")).TARGETS
