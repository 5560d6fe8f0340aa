"""The course kit's autograder: checks that re-measure learner code, and the nbgrader glue.

The locked first cell of every lab calls :func:`begin`, which keeps notebook code from
ending the kernel. A hidden test cell calls :func:`grade`, which hands the check to the
grader process when the notebook is being graded (the grader's verdict is the grade). In a
notebook (Colab included), :func:`check` runs the same checks on the notebook's own objects.
"""

from __future__ import annotations

import os

from .kernel import harness

__version__ = "0.1.0"


def begin(lab: str):
    """Start grading-safe mode for ``lab``: clocks captured, kernel exits refused. Returns the
    lab's targets (its ``targets.py``), so that a notebook quotes a tier by reading it there
    instead of restating it."""
    from . import labs
    from .kernel.stash import STASH
    from .targets import for_lab

    labs.load_steps(lab)  # fails early on a wrong lab id; registers the lab's kit steps
    STASH.lab = lab
    harness.guard_kernel()
    _guard_learner_functions(lab)
    return for_lab(lab)


def _guard_learner_functions(lab: str) -> None:
    """Under grading, give the functions the grader calls a deadline after every cell."""
    from .kernel.channel import ENDPOINT_ENV
    from .labs import learner_names

    names = learner_names(lab)
    if not names or not os.environ.get(ENDPOINT_ENV):
        return
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is None:
        return
    from .kernel.agent import guard
    from .targets import call_timeout_s

    timeout_s = call_timeout_s()
    ip.events.register("post_run_cell", lambda result: guard(ip.user_ns, names, timeout_s))


def grade(name: str) -> None:
    """Run check ``name`` (a hidden test cell's one line); AssertionError with the reason if it fails.

    Graded, the grader runs it (:func:`autograder.kernel.agent.grade`); outside a grading run (no
    grader in the environment) the check runs here, in the learner's kernel, as :func:`check`.
    """
    from .kernel import agent

    if agent.connection() is not None:
        agent.grade(name)
        return
    result = _local_session().run(name)
    if not result.passed:
        raise AssertionError(result.message)


def _local_session():
    """The in-kernel session for hidden cells run outside grading: one per lab, so that the
    tiers of one measurement share it, and a fresh one once a graded function was redefined."""
    from .grader.session import session
    from .kernel.agent import _main_namespace
    from .labs import learner_names
    from .kernel.stash import STASH

    namespace = _main_namespace()
    lab = STASH.lab
    measured = (lab, tuple(id(namespace.get(n)) for n in learner_names(lab))) if lab else None
    if STASH.local is None or STASH.local[0] != measured:
        STASH.local = (measured, session.local())
    return STASH.local[1]


def check(name: str | None = None, *, lab: str | None = None, namespace: dict | None = None,
          as_json: bool = False) -> float:
    """Run this lab's checks (or the one called ``name``) on the notebook's own objects.

    Prints one line per check and a last line ``score: X/Y`` (JSON with ``as_json``); returns
    the score. The learner's objects are looked up by name in ``namespace`` (default: the
    notebook's globals). In a student bundle, checks that need the reference are listed as
    measured only by the instructor's grading.
    """
    import __main__

    from .grader.session.catalog import for_lab
    from .report import print_report
    from .grader.session.session import local
    from .kernel.stash import STASH

    lab = lab or STASH.lab
    if lab is None:
        raise RuntimeError("run the lab's first cell (it calls autograder.begin) before check()")
    checks = for_lab(lab)
    if name is not None:
        if name not in checks:
            raise KeyError(f"{lab} has no check {name!r}; it has {', '.join(checks)}")
        checks = {name: checks[name]}
    namespace = vars(__main__) if namespace is None else namespace
    session = local(lab, namespace)
    return print_report([session.run(c.name) for c in checks.values()], as_json=as_json)
