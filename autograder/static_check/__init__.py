"""A static check of a lab notebook's learner cells, before anything runs.

The grade never depends on trusting the kernel (docs/security/trust-boundary.md), but some
code has no business in a learner cell: code that reaches the grader's internals, patches
modules, runs strings as code or runs shell commands. This module reads a notebook and
reports such code as :class:`Finding` s, each naming its cell and line, without running or
importing anything from the notebook. A finding does not change a score: the instructor's
CSV and report flag the submission for review, and self-check shows the learner the same
findings before they submit.

Learner cells are the cells that run as code and that nbgrader does not restore from the
instructor's notebook: solution cells and cells a learner added (nbgrader restores locked and
grade cells, so their submitted text never runs). Given the instructor's notebook, the check
follows nbgrader's own rules for which cells those are, so edited metadata hides nothing. Each
cell is read as the kernel reads it: IPython's input transformer turns ``%time`` and ``!ls``
into ``get_ipython()`` calls, and a one-line cell goes through automagic, so ``rm -rf ~ + 1``
is the shell command it runs, not a subtraction. Code that allowed magics, string annotations
and ``course.faults.cold_start`` run is checked as code too.

Public API: :func:`check_notebook`, :func:`check_source`, :class:`Finding`,
:data:`ALLOWED_IMPORTS` (the allowlist), :data:`DENIED` and :data:`RULES` (the rule ids).

What a static check cannot see: names built at run time and used through a plain variable
(``getattr(obj, name)`` is allowed on objects that are not modules: lab 04's solution needs
it), modules kept in objects' attributes or handed out by the kit under other names
(``course.kernels.np``), files written with ``open`` (allowed: lab 02 checkpoints to disk) and
then imported, and whatever the kit's own modules let code do. The trust boundary, not this check, decides the grade.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import nbformat

from .cells import _cells_that_run, _trees
from .checker import _check_text
from .names import _Scope, _scope
from .policy import ALLOWED_IMPORTS, DENIED, RULES

__all__ = ["ALLOWED_IMPORTS", "DENIED", "RULES", "Finding", "check_notebook", "check_source"]


@dataclass(frozen=True)
class Finding:
    """One flagged construct: code cell ``cell`` (1-based among the notebook's code cells),
    ``line`` (1-based within the cell as the learner wrote it), a rule id from :data:`RULES`,
    what was found and why, and the cell's nbgrader ``grade_id`` when it has one."""

    cell: int
    line: int
    rule: str
    message: str
    grade_id: str | None = None

    def __str__(self) -> str:
        where = f"cell {self.cell} ({self.grade_id})" if self.grade_id else f"cell {self.cell}"
        return f"{where}, line {self.line}: {self.message}"


def check_notebook(path: str | Path, source: str | Path | None = None) -> list[Finding]:
    """Findings in the learner cells of the notebook at ``path``, in cell and line order.

    With ``source`` (the instructor's notebook, ``solutions/<lab>/<lab>.ipynb``) the cells are
    read as nbgrader will run them (see :func:`_cells_that_run`), so editing a cell's metadata
    hides nothing; without it the submitted metadata and cell types are trusted. What every
    cell imports, restored ones included, counts. Cells are numbered among those that run as
    code: the code cells, in any notebook nbgrader does not retype.
    """
    nb = nbformat.read(str(path), as_version=4)
    instructor = nbformat.read(str(source), as_version=4) if source else None
    cells = list(_cells_that_run(nb, instructor))
    scope = _scope(_trees(text for _, text, _ in cells))
    findings = []
    for number, (grade_id, text, learners) in enumerate(cells, start=1):
        if learners:
            findings += _findings(text, number, grade_id, scope)
    return findings


def check_source(source: str, cell: int = 1, grade_id: str | None = None, *,
                 bindings: Mapping[str, str] | None = None) -> list[Finding]:
    """Findings in one learner cell's ``source``, reported as cell ``cell`` (``grade_id``).

    ``bindings`` names what earlier cells imported (``{"np": "numpy"}``), so that
    ``np.ctypeslib`` is recognised; the cell's own imports are added to it.
    """
    return _findings(source, cell, grade_id, _scope(_trees([source]), dict(bindings or {})))


def _findings(text: str, cell: int, grade_id: str | None, scope: _Scope) -> list[Finding]:
    """One cell's findings as :class:`Finding` s, sorted, without duplicates."""
    return [Finding(cell, line, rule, message, grade_id)
            for line, rule, message in sorted(set(_check_text(text, scope)))]
