"""``python -m autograder grade COURSE_DIR [ASSIGNMENT]``: grade a cohort with nbgrader.

``COURSE_DIR`` is an nbgrader course laid out as usual (``nbgrader_config.py``, the source
notebooks, ``submitted/<student>/<assignment>/``). Every submission is autograded in its own
process and a scratch copy of the course (:mod:`autograder.grader.nbgrading.scratch_course`), with a progress
bar; a broken, hanging or hostile submission is recorded as such and grading moves on. Only
the grader's verdicts for that student and lab reach the real gradebook; if the course or the
kit changed while a submission ran, it is put back and that submission scores 0. Scores go to a CSV.
"""

from __future__ import annotations

import csv
import os
import shutil
import sys
import time
from pathlib import Path

from tqdm import tqdm

from . import engine
from ..nbgrading import nbgrader_run, scratch_course
from ..errors import SetupError
from .limits import Limits
from ...report import Outcome

CSV_FIELDS = ["student_id", "assignment", "score", "max_score", "late_penalty", "status", "failed_checks",
              "flags", "static_findings", "seconds", "seconds_late", "sandbox", "peak_memory_mib", "peak_disk_mib"]


def submissions(course: Path, assignment: str | None) -> list[tuple[str, str]]:
    """(student, assignment) pairs found under ``submitted/``."""
    submitted = course / "submitted"
    if not (course / "nbgrader_config.py").exists():
        raise SetupError(f"{course} is not an nbgrader course (no nbgrader_config.py)")
    if not submitted.is_dir():
        raise SetupError(f"{course} has no submitted/ folder")
    pairs = sorted((s.name, a.name) for s in submitted.iterdir() if s.is_dir()
                   for a in s.iterdir() if a.is_dir() and assignment in (None, a.name))
    if not pairs:
        raise SetupError(f"no submissions{' for ' + assignment if assignment else ''} in {submitted}")
    return pairs


def write_csv(outcomes: list[Outcome], path: Path) -> None:
    """One row per submission: score, maximum, and what failed.

    Written next to ``path`` and renamed over it, so that whatever stands at ``path`` (a link
    to the gradebook, a pipe) is replaced, never written through.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    with open(tmp, "x", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for o in outcomes:
            failed = [r.name for r in o.results if not r.passed]
            w.writerow({"student_id": o.student, "assignment": o.assignment, "score": f"{o.score:g}",
                        "max_score": f"{o.max_score:g}", "late_penalty": f"{o.late_penalty:g}",
                        "status": ("retry: " if o.retry else "error: ") + o.error if o.error else "graded",
                        "failed_checks": " ".join(failed), "flags": " ".join(o.flags),
                        "static_findings": len(o.findings), "seconds": f"{o.seconds:.0f}",
                        "seconds_late": f"{o.seconds_late:.0f}", "sandbox": "bubblewrap" if o.sandboxed else "none",
                        "peak_memory_mib": f"{o.peak_memory_bytes / 2**20:.0f}",
                        "peak_disk_mib": f"{o.peak_disk_bytes / 2**20:.0f}"})
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    os.replace(tmp, path)


def summary(o: Outcome) -> str:
    """One submission's line in the progress output: score, and whatever went wrong."""
    return (f"{o.student} {o.assignment}: {o.score:g}/{o.max_score:g} in {o.seconds:.0f} s"
            + (f"  late by {o.seconds_late:.0f} s, penalty {o.late_penalty:g}" if o.seconds_late else "")
            + (f"  error: {o.error}" if o.error else "")
            + (f"  flagged: the kernel reported passes the grader did not confirm: {' '.join(o.flags)}"
               if o.flags else "")
            + (f"  ended {len(o.killed)} leftover process(es)" if o.killed else "")
            + (f"  static check: {len(o.findings)} finding(s), see autograde.log" if o.findings else ""))


def totals(outcomes: list[Outcome], seconds: float) -> str:
    """The run's closing lines: how many graded, failed (by cause) and flagged, and the time."""
    failed = [o for o in outcomes if o.error]
    causes: dict[str, int] = {}
    for o in failed:
        cause = o.error.split(":")[0].split(";")[0]
        causes[cause] = causes.get(cause, 0) + 1
    lines = [f"{len(outcomes) - len(failed)} graded, {len(failed)} failed to grade, "
             f"{sum(1 for o in outcomes if o.flags)} flagged, in {seconds / 60:.1f} min"]
    lines += [f"  failed: {n} x {cause}" for cause, n in sorted(causes.items(), key=lambda kv: -kv[1])]
    return "\n".join(lines)


def preflight(labs: set[str], sandboxed: bool, workers: int | None, ray_address: str | None,
              uncalibrated: bool = False) -> bool:
    """Refuse what ``grade`` (and ``serve``) must not do: grade without a sandbox unless told to,
    side by side without one, or side by side where ``calibrate`` has not shown the tiers still
    separate (:mod:`autograder.grader.engine.fair_timing`; ``uncalibrated``: where it has not measured,
    say so and go on). Whether grading runs side by side."""
    from ..isolation import sandbox

    side_by_side = bool(ray_address) or (workers or 1) > 1
    if sandboxed and (why := sandbox.unavailable()):
        raise SetupError(f"grade runs every submission in a sandbox, and none can be made here: {why}. "
                         "Pass --unsandboxed to grade without one (grades.csv then says sandbox=none)")
    if side_by_side and not sandboxed:
        raise SetupError("--workers and --ray grade in sandboxes only: without one, gradings side by side "
                         "share the network ports of their Rays and each other's files")
    if not sandboxed:
        print("warning: grading without a sandbox: learner code runs as you, with your files and processes in reach")
    if side_by_side and workers:
        from . import fair_timing

        fair, found = fair_timing.allowed(workers, labs, uncalibrated=uncalibrated)
        if not fair:
            raise SetupError(found)
        print(found)
    return side_by_side


def run(course: Path, assignment: str | None = None, *, csv_path: Path | None = None,
        sandboxed: bool = True, regrade: bool = False, workers: int | None = None, ray_address: str | None = None,
        uncalibrated: bool = False, **limits) -> int:
    """Grade every submission; exit code 0 when all were graded, 1 when any failed to grade.

    Each submission runs in the sandbox (:mod:`autograder.grader.isolation.sandbox`); where none can be
    made this refuses, unless ``sandboxed=False`` (``--unsandboxed``), which the CSV records.
    A submission graded before under the same fingerprint (its files, the kit, the limits and
    the seed: :mod:`autograder.grader.engine.resume`) keeps its grade unless ``regrade``; so a run
    stopped half-way (Ctrl-C, a crash) continues where it stopped. ``workers`` (a local Ray with
    that many grading slots) or ``ray_address`` (a cluster's) grade side by side
    (:mod:`autograder.grader.engine.pool`); this process still writes every grade. ``workers`` needs
    ``calibrate --workers`` to have measured the labs' tiers at that concurrency here, unless
    ``uncalibrated``.
    """
    from . import cohort_report, resume
    from ..nbgrading import feedback

    began = time.monotonic()
    course = Path(course).resolve()
    pairs = submissions(course, assignment)
    side_by_side = preflight({a for _, a in pairs}, sandboxed, workers, ray_address, uncalibrated)
    limits = Limits(sandboxed=sandboxed, **limits)
    for a in sorted({a for _, a in pairs}):
        nbgrader_run.ensure_assignment(course, a)
    outcomes, kept = [], 0
    gradebook = scratch_course.template(course)  # bytes: no file a submission could rewrite for the next
    kit = resume.kit_fingerprint()
    csv_path = Path(csv_path) if csv_path else course / "grades.csv"
    try:
        with engine.no_bytecode(), tqdm(total=len(pairs), desc="grading", unit="submission") as progress:
            todo = []
            for student, a in pairs:
                mark = resume.fingerprint(course, student, a, kit, limits)
                outcome = None if regrade else resume.load(course, student, a, mark)
                if outcome is None:
                    todo.append(engine.Job(student, a, mark))
                else:
                    kept += 1
                    outcomes.append(outcome)
                    progress.update()

            def done(f: engine.Finished) -> None:
                tqdm.write(summary(f.outcome) + (f"  [{f.where}]" if f.where else ""))
                outcomes.append(f.outcome)
                progress.update()

            if todo:
                _engine(course, limits, kit, gradebook, side_by_side, workers, ray_address, regrade,
                        {j.assignment for j in todo}).run(todo, done)
    except KeyboardInterrupt:
        write_csv(outcomes, csv_path)
        print(f"interrupted: {len(outcomes)} of {len(pairs)} submissions are in {csv_path}; "
              "run the same command again to grade the rest", file=sys.stderr)
        return 130
    order = {pair: k for k, pair in enumerate(pairs)}
    outcomes.sort(key=lambda o: order[(o.student, o.assignment)])  # finished in any order, listed as found
    write_csv(outcomes, csv_path)
    from ..session.catalog import descriptions

    what = {a: descriptions(a) for a in {o.assignment for o in outcomes}}
    pages = [p for p in (feedback.write(course, o, what[o.assignment]) for o in outcomes) if p]
    report = cohort_report.write(course, outcomes)
    print(totals(outcomes, time.monotonic() - began))
    print(f"wrote {csv_path} ({len(outcomes)} submissions"
          + (f"; {kept} unchanged since graded kept their grade, --regrade grades them again" if kept else "") + ")")
    print(f"wrote {len(pages)} feedback page(s) (feedback/<student>/<assignment>/{feedback.NAME}) and {report}")
    return 1 if any(o.error for o in outcomes) else 0


def _engine(course, limits, kit, gradebook, side_by_side, workers, ray_address, regrade, labs) -> engine.Engine:
    """The engine ``grade`` drives: one grading at a time here, or a Ray's grading slots
    (:class:`autograder.grader.engine.engine.Slots`: ``workers`` here, or the cluster at ``ray_address``)."""
    if not side_by_side:
        return engine.Engine(course, engine.Here(course, limits, gradebook), limits, kit, regrade)
    slots = engine.Slots(course, limits, kit, labs, workers=workers, address=ray_address, gradebook=gradebook,
                         say=tqdm.write)
    return engine.Engine(course, slots, limits, kit, regrade)
