"""Each lab's checks and reference implementations, found by lab id (the grader's side).

A lab's checks are its folder's ``checks`` module (``autograder/labs/labNN/checks.py``), which
registers them with :func:`autograder.checks.register` when first imported; its reference
implementations are its folder's ``reference`` package, which a student bundle leaves out and a
learner's sandbox shows empty.
"""

from __future__ import annotations

import importlib

from ...checks import REGISTRY, Check, InstructorOnly, Tiered
from ...labs import UnknownLab, load_steps, module_name


def for_lab(lab: str) -> dict[str, Check]:
    """All checks of a lab (:class:`~autograder.labs.UnknownLab` for an id no lab has),
    importing its module, and registering the lab's kit steps, on first use."""
    load_steps(lab)
    importlib.import_module(checks_module(lab))
    return REGISTRY.get(lab, {})


def checks_module(lab: str) -> str:
    """The checks module of a lab id: ``00_measure`` -> ``autograder.labs.lab00.checks``."""
    return module_name(lab, "checks")


def reference(lab: str) -> dict:
    """The reference implementations of ``lab``, by the names the learner's notebook uses.

    Raises :class:`InstructorOnly` in a student bundle, which leaves them out.
    """
    module = module_name(lab, "reference")
    try:
        found = vars(importlib.import_module(module))
    except ModuleNotFoundError as exc:
        if exc.name == module:
            raise InstructorOnly(f"{module} is not in this install") from None
        raise
    if found.get("__file__") is None:  # an empty folder in its place (a sandbox): a namespace package
        raise InstructorOnly(f"{module} is not shown here")
    return found


def tiered(lab: str) -> list[Tiered]:
    """A lab's tiered measurements, in registration order."""
    return list(dict.fromkeys(c.tiered for c in for_lab(lab).values() if c.tiered is not None))


def descriptions(lab: str) -> dict[str, str]:
    """What each check of ``lab`` measures: the first paragraph of its docstring ("" when none);
    ``{}`` for an assignment that is no lab of this kit."""
    try:
        checks = for_lab(lab)
    except UnknownLab:
        return {}
    return {name: " ".join((c.fn.__doc__ or "").strip().split("\n\n")[0].split()) for name, c in checks.items()}
