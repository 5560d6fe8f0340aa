"""Hostile lab 03 submissions (same shape as :mod:`attacks_lab00`), graded as a cohort by
``tests/test_attacks.py``. The issue's original lab 03 attack -- a blank lab replacing every
function of ``autograder.labs.lab03.checks`` with a no-op -- scored 15/15 when the checks ran in the
learner's kernel. A leaking quota is measured, with its message, by the grader's own harness in
``tests/test_checks_lab03.py``: what the kernel patches never reaches that harness."""

from __future__ import annotations

from notebooks import released

LAB = "03_quotas"
SEED = 20251201

ATTACKS: dict[str, dict] = {}

ATTACKS["l03-noop-checks"] = dict(
    base=released(LAB), demos=False,
    after={"setup": ['''
import autograder
from autograder import checks
from autograder.kernel import agent
from autograder.labs.lab03 import checks as lab03

_noop = lambda *a, **k: None  # noqa: E731
for _name in dir(lab03):
    if callable(getattr(lab03, _name)) and not _name.startswith("__"):
        setattr(lab03, _name, _noop)
for _check in checks.REGISTRY[lab03.LAB].values():
    object.__setattr__(_check, "fn", _noop)
autograder.grade = agent.grade = _noop
''']},
    honest=set(),
    why="every function of autograder.labs.lab03.checks, every registered check and grade() replaced by no-ops",
)
