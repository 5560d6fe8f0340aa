"""One line per check and a last line ``score: X/Y`` -- the same report everywhere."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field


@dataclass
class Result:
    """The outcome of one graded check."""

    name: str
    score: float
    max_score: float
    message: str = ""
    skipped: bool = False  # not measured here: only the instructor's grading can (a student bundle)

    @property
    def passed(self) -> bool:
        return self.score >= self.max_score


def mark(r: Result) -> str:
    """PASS, PART, FAIL or SKIP: how every report names a check's outcome."""
    if r.skipped:
        return "SKIP"
    return "PASS" if r.passed else ("PART" if r.score > 0 else "FAIL")


def line(r: Result) -> str:
    """``PASS name  2/2``, ``FAIL name  0/2  reason`` or ``SKIP name  -/2  reason``."""
    if r.skipped:
        return f"SKIP {r.name:<28} -/{r.max_score:g}  {r.message}"
    text = f"{mark(r)} {r.name:<28} {r.score:g}/{r.max_score:g}"
    return f"{text}  {r.message}" if r.message else text


def total(results: list[Result]) -> tuple[float, float]:
    """Score and maximum over the checks measured here (skipped ones count in neither)."""
    measured = [r for r in results if not r.skipped]
    return sum(r.score for r in measured), sum(r.max_score for r in measured)


@dataclass(frozen=True)
class Outcome:
    """One submission's grading: per-check results, or why grading failed. Made once, complete
    (a later step makes a new one with :func:`dataclasses.replace`). ``retry``: the grader itself
    could not carry the grading out (its reference, its slot, its Ray) -- the submission is not
    to blame, the grading is not recorded, and a service queues it again."""

    student: str
    assignment: str
    results: list[Result] = field(default_factory=list)
    error: str = ""
    retry: bool = False
    flags: list[str] = field(default_factory=list)  # kernel passes the grader did not confirm
    log: str = ""                                   # nbgrader's full output, for --verbose and the log file
    killed: list[str] = field(default_factory=list)  # processes it left running (not Ray's), ended by the grader
    cell_errors: list[str] = field(default_factory=list)  # ungraded cells that raised: often why a check failed
    findings: list[str] = field(default_factory=list)     # the static check's, for review (not scored)
    seconds: float = 0.0                                  # wall time the grading took (a hang shows here)
    # where that time went: set-up (static check, reference process, sandbox), nbgrader (the
    # learner's notebook and the checks, the reference's turns among them), clean-up, results
    phases: dict[str, float] = field(default_factory=dict)
    seconds_late: float = 0.0                             # past the due date (nbgrader's timestamp.txt)
    late_penalty: float = 0.0                             # nbgrader's late-submission plugin's, in points
    sandboxed: bool = False                               # learner code ran in the OS sandbox
    peak_memory_bytes: int = 0                            # its control group's peak (tmpfs included); 0: not measured
    peak_disk_bytes: int = 0                              # its work folder's peak (autograder.grader.isolation.workspace)

    @property
    def score(self) -> float:
        return total(self.results)[0]

    @property
    def max_score(self) -> float:
        return total(self.results)[1]


def print_report(results: list[Result], *, as_json: bool = False, extra: dict | None = None) -> float:
    """Print the report (text or JSON) and return the score."""
    score, max_score = total(results)
    if as_json:
        print(json.dumps({**(extra or {}), "score": score, "max_score": max_score,
                          "checks": [asdict(r) for r in results]}, indent=2))
    else:
        for r in results:
            print(line(r))
        skipped = [r for r in results if r.skipped]
        rest = (f" (and {sum(r.max_score for r in skipped):g} points in {len(skipped)} checks that only "
                "your instructor's grading measures)") if skipped else ""
        print(f"score: {score:g}/{max_score:g}{rest}")
    return score
