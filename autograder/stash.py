"""What a process that carries out a grader's requests keeps between them, in one object.

The learner's kernel and the reference process each hold one :data:`STASH`: the values a
request asked to keep (``keep=``, read back by ``{"stashed": key}``), the actor handles the
grader forwarded, the kernel's connection to its grader, the learner's own self-check
session, and (reference process) the grader's own actors it keeps alive. Everything else on
the kernel's side is stateless.
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


STASH = Stash()
