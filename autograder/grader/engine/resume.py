"""What a cohort run has graded already, so that a rerun grades only what changed.

Each graded submission leaves one record, ``COURSE/.autograder/graded/<assignment>/<student>.json``,
written the moment its grade is in the gradebook: the outcome (scores and messages as plain
data) and the *fingerprint* it was graded under -- the submitted files, the grading kit's own
code, and the limits and seed the grading ran with. A rerun of ``grade`` (after Ctrl-C, a
crash, or new submissions) takes a submission whose fingerprint is unchanged from its record
instead of grading it again; ``--regrade`` grades everything. A grading the grader itself
could not carry out (its reference process did not start) leaves no record: it is retried.

The records are the grader's own files (the course folder is never in a sandbox); a record
that does not parse is treated as missing and the submission is graded again.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, fields
from pathlib import Path

from ... import seed
from ...kernel import channel
from ...report import Outcome, Result
from .limits import Limits
from ..isolation.sandbox import KIT_ROOT

FOLDER = ".autograder/graded"
KIT_FOLDERS = ("autograder", "course")
SESSION_VARIABLES = (seed.ENV, seed.FD_ENV, channel.ENDPOINT_ENV, channel.KEY_ENV)  # not settings


def _digest_tree(root: Path, pattern: str = "*") -> str:
    """sha256 over the relative names and bytes of the regular files under ``root``."""
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob(pattern) if p.is_file() and not p.is_symlink()
                       and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def kit_fingerprint() -> str:
    """The grading code this kit runs: a fix to a check or a reference regrades everything."""
    return hashlib.sha256("".join(_digest_tree(KIT_ROOT / f, "*.py") for f in KIT_FOLDERS).encode()).hexdigest()


def fingerprint(course: Path, student: str, assignment: str, kit: str, limits: Limits) -> str:
    """What one grading depends on: the submitted files, the kit, the limits, the grader's
    ``AUTOGRADER_*`` settings (e.g. ``AUTOGRADER_CALL_TIMEOUT_S``) and the seed."""
    settings = {k: v for k, v in os.environ.items() if k.startswith("AUTOGRADER_") and k not in SESSION_VARIABLES}
    terms = {"submission": _digest_tree(course / "submitted" / student / assignment), "kit": kit,
             "limits": limits.args(), "settings": settings, "seed": seed.base() or ""}
    return hashlib.sha256(json.dumps(terms, sort_keys=True, default=str).encode()).hexdigest()


def _path(course: Path, student: str, assignment: str) -> Path:
    return course / FOLDER / assignment / f"{student}.json"


def load(course: Path, student: str, assignment: str, print_: str) -> Outcome | None:
    """The recorded outcome of this submission, if it was graded under fingerprint ``print_``."""
    path = _path(course, student, assignment)
    try:
        record = json.loads(path.read_text())
        if record["fingerprint"] != print_:
            return None
        data = record["outcome"]
        data["results"] = [Result(**r) for r in data["results"]]
        known = {f.name for f in fields(Outcome)}
        return Outcome(**{k: v for k, v in data.items() if k in known})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save(course: Path, outcome: Outcome, print_: str) -> None:
    """Record a finished grading (not one the grader could not carry out), atomically."""
    if outcome.retry:
        return
    path = _path(course, outcome.student, outcome.assignment)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = asdict(outcome)
    data.pop("log")  # kept in autograde.log next to the graded notebook
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"fingerprint": print_, "outcome": data}, indent=1))
    os.replace(tmp, path)


def seconds_by_lab(course: Path) -> dict[str, list[float]]:
    """Per lab, how long the gradings recorded in this course took (oldest first): what the
    grading service estimates waits from before it has graded a lab itself."""
    out: dict[str, list[tuple[float, float]]] = {}
    for path in (course / FOLDER).glob("*/*.json"):
        try:
            seconds = float(json.loads(path.read_text())["outcome"].get("seconds") or 0)
            if seconds > 0:
                out.setdefault(path.parent.name, []).append((path.stat().st_mtime, seconds))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return {lab: [s for _, s in sorted(times)] for lab, times in out.items()}
