"""One folder per lab's grading, ``autograder/labs/labNN/``, each file run by one side of a grading.

A lab's folder holds, side by side:

* ``__init__``, the lab's *spec*: ``SPEC``, a frozen :class:`LabSpec` of plain facts the grader,
  the reference process and the learner's kernel all read (its id, whether the grader starts
  its Ray and how, where the reference runs, how the learner's side is paused, the learner
  names the checks call, the fewest cores a grading slot needs), and ``LAB``, its id again as
  ``SPEC.lab`` for the lab's own modules;
* ``targets``, its targets (:mod:`autograder.targets`);
* ``steps``, where the lab has some, its own kit steps (:mod:`autograder.kernel.routines`), run in
  the kernel and in the reference process alike, and ``instruments``, the grader's own Ray actors
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
from dataclasses import dataclass
from typing import Literal


class UnknownLab(LookupError):
    """A lab id this kit has no lab for."""


@dataclass(frozen=True)
class LabSpec:
    """What the grader, the reference process and the learner's kernel need to know of one lab,
    stated once in its folder's ``__init__`` (``SPEC``) and checked when it is made."""

    lab: str
    """The lab's id, its notebook's name: ``"02_restart_recovery"``."""
    learner_names: tuple[str, ...] = ()
    """The learner functions and classes the checks call; in grading each gets a deadline after
    every cell (:func:`autograder.kernel.agent.guard`)."""
    ray: bool = False
    """Whether the grader starts the lab's Ray (the kernel joins it)."""
    ray_start: str = "connect"
    """The kit step that starts the lab's Ray, and a reference's own (``connect``: the fleet's resources)."""
    reference_ray: Literal["shared", "own"] = "shared"
    """``"own"``: the reference runs in a Ray of its own, out of the kernel's sight, rather than
    in the lab's Ray beside the learner's actors."""
    pause_learner: Literal["freeze", "idle", False] = "freeze"
    """How the learner's side is kept off the cores while a reference of its own is timed:
    stopped (``"freeze"``), at idle CPU priority (``"idle"``, for a lab whose Ray runs slower after
    a freeze), or not at all (``False``)."""
    min_slot_cores: int = 1
    """The fewest cores one grading of the lab must have for its grades to hold. A check that is no
    ratio to a reference timed beside it (lab 01's throughput model: measured over the learner's
    own prediction) has nothing to cancel a starved slot. ``grade --workers N`` gives a grading as
    many slots as that takes; ``calibrate LAB --workers N`` measures it (the solution graded N at
    a time loses a point where the slots are too small)."""

    def __post_init__(self) -> None:
        if not (len(self.lab) > 3 and self.lab[:2].isdigit() and self.lab[2] == "_"):
            raise ValueError(f"a lab id is NN_name, not {self.lab!r}")
        if self.reference_ray not in ("shared", "own"):
            raise ValueError(f"{self.lab}: reference_ray must be 'shared' or 'own', not {self.reference_ray!r}")
        if self.reference_ray == "own" and not self.ray:
            raise ValueError(f"{self.lab}: a reference Ray of its own needs the lab's Ray (ray=True)")
        if self.pause_learner not in ("freeze", "idle", False):
            raise ValueError(f"{self.lab}: pause_learner must be 'freeze', 'idle' or False, not {self.pause_learner!r}")
        if isinstance(self.min_slot_cores, bool) or not isinstance(self.min_slot_cores, int) or self.min_slot_cores < 1:
            raise ValueError(f"{self.lab}: min_slot_cores must be a whole number >= 1, not {self.min_slot_cores!r}")
        if not all(isinstance(n, str) and n.isidentifier() for n in self.learner_names):
            raise ValueError(f"{self.lab}: learner_names must be Python names, not {self.learner_names!r}")


def module_name(lab: str, part: str = "") -> str:
    """The module of ``lab``'s package (``autograder.labs.lab02``), or of a ``part`` of it."""
    return f"{__name__}.lab{str(lab)[:2]}" + (f".{part}" if part else "")


def spec(lab: str) -> LabSpec:
    """The spec of ``lab``; :class:`UnknownLab` for an id no lab of the kit has."""
    name = module_name(lab)
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:  # the lab exists; something it imports is missing
            raise
        raise UnknownLab(f"no lab {lab!r} in this kit") from None
    if module.SPEC.lab != lab:
        raise UnknownLab(f"no lab {lab!r} in this kit (there is {module.SPEC.lab!r})")
    return module.SPEC


def all_labs() -> list[str]:
    """The ids of the kit's labs: the ``LAB`` of each ``labNN`` folder here."""
    import pkgutil

    folders = (m.name for m in pkgutil.iter_modules(__path__) if m.ispkg and m.name.startswith("lab"))
    return sorted(importlib.import_module(f"{__name__}.{name}").SPEC.lab for name in folders)


def load_steps(lab: str) -> None:
    """Register ``lab``'s own kit steps, if it has any (the kernel and the reference process)."""
    spec(lab)
    try:
        importlib.import_module(module_name(lab, "steps"))
    except ModuleNotFoundError as exc:
        if exc.name != module_name(lab, "steps"):
            raise


def needs_ray(lab: str) -> bool:
    """Whether the grader starts ``lab``'s Ray."""
    return spec(lab).ray


def own_reference_ray(lab: str) -> bool:
    """Whether ``lab``'s reference runs in a Ray of its own, out of the kernel's sight (its spec's
    ``reference_ray``), rather than in the lab's Ray beside the learner's actors."""
    return spec(lab).reference_ray == "own"


def min_slot_cores(lab: str) -> int:
    """The fewest cores one grading slot must have for ``lab``'s grades to hold
    (:attr:`LabSpec.min_slot_cores`): ``grade --workers N`` does not cut the machine finer than this."""
    return spec(lab).min_slot_cores


def pauses_learner(lab: str) -> str | None:
    """How the learner's side (its kernel and the lab's Ray) is kept off the cores while the
    reference's turn is timed, where the reference has a Ray of its own: ``"freeze"`` (stopped) or
    ``"idle"`` (idle CPU priority), from :attr:`LabSpec.pause_learner`; ``None`` where it is not."""
    mode = spec(lab).pause_learner
    return mode if mode and own_reference_ray(lab) else None


def ray_start(lab: str) -> str:
    """The kit step that starts ``lab``'s Ray, and a reference's own."""
    return spec(lab).ray_start


def learner_names(lab: str) -> tuple[str, ...]:
    """The learner functions and classes ``lab``'s checks call.

    In grading, each gets a deadline after every cell (:func:`autograder.kernel.agent.guard`).
    """
    return spec(lab).learner_names
