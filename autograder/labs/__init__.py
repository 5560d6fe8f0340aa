"""One folder per lab's grading, ``autograder/labs/labNN/``, each file run by one side of a grading.

A lab's folder holds, side by side:

* ``__init__``, the lab's *spec*, plain facts the grader, the reference process and the
  learner's kernel all read: ``LAB``, its id (``"02_restart_recovery"``); ``RAY``, whether the
  grader starts the lab's Ray (the kernel joins it); ``RAY_START``,
  the kit step that starts it (default ``connect``: the fleet's resources); ``REFERENCE_RAY``,
  ``"own"`` where the reference runs in a Ray of its own rather than in the lab's; ``PAUSE_LEARNER``,
  how the learner's side is kept off the cores while the reference is timed (default ``"freeze"``;
  ``"idle"``: idle CPU priority, for a lab whose Ray runs slower after a freeze; ``False``: not at all); ``LEARNER_NAMES``,
  the learner functions and classes the checks call (each gets a deadline);
* ``targets``, its targets (:mod:`autograder.targets`);
* ``steps``, where the lab has some, its own kit steps (:mod:`autograder.routines`), run in the
  kernel and in the reference process alike, and ``instruments``, the grader's own Ray actors
  those steps make (closed to learner code: :mod:`autograder.labs.instruments`);
* ``checks``, its graded checks, run in the grader's process only (:mod:`autograder.checks`);
* ``reference``, the instructor's reference implementations: the solution notebook's code,
  statement for statement (``tests/test_reference_once.py`` holds the two identical), run in the
  grader's reference process. A learner's sandbox shows an empty folder in its place, and a
  student bundle leaves it out.

The kernel imports the spec, the targets and the steps while it is graded; those never import a
lab's ``checks`` or ``reference`` or the grader's side (``pyproject.toml``'s import contracts,
held by ``tests/test_layers.py``).
"""

from __future__ import annotations

import importlib
from types import ModuleType


class UnknownLab(LookupError):
    """A lab id this kit has no lab for."""


def module_name(lab: str, part: str = "") -> str:
    """The module of ``lab``'s package (``autograder.labs.lab02``), or of a ``part`` of it."""
    return f"{__name__}.lab{str(lab)[:2]}" + (f".{part}" if part else "")


def spec(lab: str) -> ModuleType:
    """The spec of ``lab``; :class:`UnknownLab` for an id no lab of the kit has."""
    name = module_name(lab)
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:  # the lab exists; something it imports is missing
            raise
        raise UnknownLab(f"no lab {lab!r} in this kit") from None
    if module.LAB != lab:
        raise UnknownLab(f"no lab {lab!r} in this kit (there is {module.LAB!r})")
    return module


def all_labs() -> list[str]:
    """The ids of the kit's labs: the ``LAB`` of each ``labNN`` folder here."""
    import pkgutil

    folders = (m.name for m in pkgutil.iter_modules(__path__) if m.ispkg and m.name.startswith("lab"))
    return sorted(importlib.import_module(f"{__name__}.{name}").LAB for name in folders)


def load_steps(lab: str) -> None:
    """Register ``lab``'s own kit steps, if it has any (the kernel and the reference process)."""
    spec(lab)
    try:
        importlib.import_module(module_name(lab, "steps"))
    except ModuleNotFoundError as exc:
        if exc.name != module_name(lab, "steps"):
            raise


def needs_ray(lab: str) -> bool:
    """Whether the grader starts ``lab``'s Ray (its spec's ``RAY``)."""
    return bool(getattr(spec(lab), "RAY", False))


def own_reference_ray(lab: str) -> bool:
    """Whether ``lab``'s reference runs in a Ray of its own, out of the kernel's sight (its spec's
    ``REFERENCE_RAY == "own"``), rather than in the lab's Ray beside the learner's actors."""
    return needs_ray(lab) and getattr(spec(lab), "REFERENCE_RAY", "shared") == "own"


def min_slot_cores(lab: str) -> int:
    """The fewest cores one grading slot must have for ``lab``'s grades to hold (its spec's
    ``MIN_SLOT_CORES``, default 1). A check that is no ratio to a reference timed side by side
    (lab 01's throughput model: measured over the learner's own prediction) has no reference to
    cancel a starved slot, so ``grade --workers N`` does not cut the machine finer than this."""
    return int(getattr(spec(lab), "MIN_SLOT_CORES", 1))


def pauses_learner(lab: str) -> str | None:
    """How the learner's side (its kernel and the lab's Ray) is kept off the cores while the
    reference's turn is timed, where the reference has a Ray of its own: ``"freeze"`` (stopped) or
    ``"idle"`` (idle CPU priority), from its spec's ``PAUSE_LEARNER`` (default ``"freeze"``); ``None``
    where it is not."""
    mode = getattr(spec(lab), "PAUSE_LEARNER", "freeze")
    if mode not in ("freeze", "idle", False):
        raise ValueError(f"{lab}: PAUSE_LEARNER must be 'freeze', 'idle' or False, not {mode!r}")
    return mode if mode and own_reference_ray(lab) else None


def ray_start(lab: str) -> str:
    """The kit step that starts ``lab``'s Ray, and a reference's own (its spec's ``RAY_START``)."""
    return str(getattr(spec(lab), "RAY_START", "connect"))


def learner_names(lab: str) -> tuple[str, ...]:
    """The learner functions and classes ``lab``'s checks call (its spec's ``LEARNER_NAMES``).

    In grading, each gets a deadline after every cell (:func:`autograder.agent.guard`).
    """
    return tuple(getattr(spec(lab), "LEARNER_NAMES", ()))
