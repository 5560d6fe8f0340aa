"""``python -m autograder check NOTEBOOK``: grade one notebook exactly as an instructor would.

Builds a throw-away nbgrader course whose source is the kit's own ``solutions/`` (so the
hidden tests are the real ones), puts the notebook in as the only submission, and runs real
``nbgrader autograde`` on it through the engine ``grade`` uses (:mod:`autograder.grader.engine.engine`).
Self-check and instructor grading therefore cannot disagree.
A student bundle has no ``solutions/``: there the notebook is run in a kernel and checked
there (:mod:`autograder.bundle_check`), without the checks only the instructor's grading can run.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .grader.nbgrading import nbgrader_run
from .grader.errors import SetupError
from .grader.engine.limits import Limits
from .grader.nbgrading.nbgrader_run import KIT_ROOT
from .report import Outcome
from .report import print_report

STUDENT = "learner"


def answer_keys(root: Path = KIT_ROOT) -> bool:
    """Whether this install is the instructor's kit (hidden tests in ``solutions/``, reference
    implementations), not a student bundle (``python -m autograder release``)."""
    return (root / "solutions").is_dir() and importlib.util.find_spec("autograder.labs.lab00.reference") is not None


def labs(root: Path = KIT_ROOT) -> list[str]:
    """The lab ids the kit ships: folders of ``solutions/``, or in a bundle its checks' labs."""
    if (root / "solutions").is_dir():
        return sorted(p.name for p in (root / "solutions").iterdir() if (p / f"{p.name}.ipynb").exists())
    from .labs import all_labs

    return all_labs()


def lab_of(notebook: Path, lab: str | None) -> str:
    """The lab a notebook belongs to: ``--lab``, else its file name, else its folder's."""
    known = labs()
    for guess in (lab, notebook.stem, notebook.parent.name):
        if guess in known:
            return guess
    if lab:
        raise SetupError(f"unknown lab {lab!r}; the kit has {', '.join(known)}")
    raise SetupError(f"cannot tell which lab {notebook.name} is; pass --lab (one of {', '.join(known)})")


def grade_notebook(notebook: Path, lab: str | None = None, **limits) -> Outcome:
    """Autograde ``notebook`` against the kit's hidden tests in a temporary course."""
    notebook = Path(notebook)
    if not notebook.is_file():
        raise SetupError(f"no such notebook: {notebook}")
    lab = lab_of(notebook, lab)
    if not answer_keys():
        from .bundle_check import grade_in_kernel

        return grade_in_kernel(notebook, lab, **limits)
    if limits.get("sandboxed") is None:  # in the sandbox wherever one can be made
        from .grader.isolation import sandbox

        limits["sandboxed"] = not sandbox.unavailable()
    with tempfile.TemporaryDirectory(prefix="autograder-check-") as tmp:
        course = Path(tmp)
        shutil.copy(KIT_ROOT / "nbgrader_config.py", course)
        shutil.copytree(KIT_ROOT / "solutions" / lab, course / "solutions" / lab)
        nbgrader_run.ensure_assignment(course, lab)
        target = course / "submitted" / STUDENT / lab
        target.mkdir(parents=True)
        shutil.copy(notebook, target / f"{lab}.ipynb")
        return _graded(course, lab, Limits(**limits))


def _graded(course: Path, lab: str, limits: Limits) -> Outcome:
    """The one submission of ``course`` graded by the engine ``grade`` uses, one at a time in this
    process (:class:`autograder.grader.engine.engine.Here`): ``check`` and ``grade`` cannot differ."""
    from .grader.engine.engine import Engine, Here

    engine, ended = Engine(course, Here(course, limits), limits, regrade=True), []
    engine.run([engine.job(STUDENT, lab)], ended.append)
    return ended[0].outcome


def run(notebook: Path, lab: str | None = None, *, as_json: bool = False, verbose: bool = False,
        unsandboxed: bool = False, **limits) -> int:
    """Print the report; exit code 0 when graded, 1 when grading itself failed.

    The notebook runs in the grader's sandbox where one can be made; on a learner's own machine
    it may run without (tampering there fools only the learner), and the report says so.
    """
    from .grader.isolation import sandbox

    why_not = "--unsandboxed" if unsandboxed else sandbox.unavailable()
    if why_not and not as_json:
        print(f"no sandbox ({why_not}): your notebook runs as you -- fine for a self-check; "
              "an instructor's `grade` runs it in one")
    elif os.environ.get("RAY_ADDRESS") and not as_json:
        print(f"RAY_ADDRESS={os.environ['RAY_ADDRESS']} is not used while grading: the sandbox has no network, "
              "so your notebook runs on a Ray of its own there (--unsandboxed runs it on your cluster)")
    outcome = grade_notebook(notebook, lab, sandboxed=not why_not, **limits)
    if not answer_keys() and not as_json:
        print("student bundle: your notebook ran in its own kernel and was checked there; checks that "
              "need the reference solutions are SKIP (your instructor's grading measures them)")
    if verbose:
        print(outcome.log, file=sys.stderr)
    if outcome.error and not as_json:
        print(f"error: {outcome.error}")
    if outcome.killed and not as_json:
        print(f"ended {len(outcome.killed)} process(es) the notebook left running: {'; '.join(outcome.killed)}")
    if outcome.flags and not as_json:
        print(f"flagged: the notebook's kernel reported passes the grader did not confirm: {' '.join(outcome.flags)}")
    if outcome.findings and not as_json:
        print(f"static check: {len(outcome.findings)} finding(s) -- not scored, but an instructor's grading "
              "flags them for review (docs/static-check/index.md):")
        print("".join(f"  {f}\n" for f in outcome.findings), end="")
    if outcome.cell_errors and not as_json:
        print("cells that raised (not graded, but a check that uses what they define fails too):")
        print("".join(f"  {e}\n" for e in outcome.cell_errors), end="")
    print_report(outcome.results, as_json=as_json,
                 extra={"notebook": str(notebook), "lab": outcome.assignment, "error": outcome.error,
                        "sandboxed": not why_not,
                        "flags": outcome.flags, "killed": outcome.killed, "cell_errors": outcome.cell_errors,
                        "findings": outcome.findings, "seconds": round(outcome.seconds, 1),
                        "phases": outcome.phases})
    if not as_json:
        where = ", ".join(f"{k} {v:.0f} s" for k, v in outcome.phases.items())
        print(f"graded in {outcome.seconds:.0f} s" + (f" ({where})" if where else ""))
    return 1 if outcome.error else 0
