"""What a process that carries out a grader's requests keeps between them, in one object.

The learner's kernel and the reference process each hold one :data:`STASH`: the values a
request asked to keep (``keep=``, read back by ``{"stashed": key}``), the actor handles the
grader forwarded, the kernel's connection to its grader, the learner's own self-check
session, (reference process) the grader's own actors it keeps alive, and the guard's state
(whether a deadline is running, which learner callables already hung). Everything else on the
kernel's side is stateless.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Stash:
    """This process's state between requests (see the module's docstring)."""

    kept: dict[str, Any] = field(default_factory=dict)     # values a request asked to keep, by key
    handles: dict[str, Any] = field(default_factory=dict)  # forwarded actor handles, by serialized form
    conn: Any = None                                       # the kernel's connection to its grader, if graded
    local: tuple | None = None                             # self-check: (learner objects measured, session)
    lab: str | None = None                                 # the lab begin() was called for
    # the grader's own Ray actors this process started (reference process only), by role: the
    # handles it exports do not keep them alive, this does
    held: dict[str, Any] = field(default_factory=dict)
    armed: bool = False                                    # a harness.deadline() is running
    # learner callables that already hung once: each further check fails at once, so a hanging
    # function costs the grader one deadline, not one per check
    timed_out: dict[Any, float] = field(default_factory=dict)


STASH = Stash()
