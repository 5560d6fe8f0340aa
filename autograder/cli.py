"""Command line: ``python -m autograder check | grade | serve | report | release | colab | calibrate``.

Exit codes: 0 graded (whatever the score); 1 grading itself failed for a notebook or for
at least one submission (the report and CSV say which and why); 2 usage or set-up error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .labs import UnknownLab
from .grader.isolation.processes import sigterm_as_ctrl_c
from .grader.errors import SetupError
from .grader.nbgrading.nbgrader_run import DEFAULT_CELL_TIMEOUT_S, DEFAULT_MEMORY_LIMIT_GIB, DEFAULT_SUBMISSION_TIMEOUT_S


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m autograder", description=__doc__.splitlines()[0],
                                epilog="Exit codes: 0 graded, 1 grading failed, 2 usage or set-up error.")
    sub = p.add_subparsers(dest="command", required=True)

    def uncalibrated(sp):
        sp.add_argument("--uncalibrated", action="store_true",
                        help="with --workers N: grade side by side even where `calibrate --workers N` has not "
                             "measured the labs' timed tiers on this machine (docs: instructors/calibrate)")

    def limits(sp):
        sp.add_argument("--cell-timeout", type=float, default=DEFAULT_CELL_TIMEOUT_S, metavar="S",
                        help="seconds one cell may run before nbgrader interrupts it (default %(default)s)")
        sp.add_argument("--timeout", type=float, default=DEFAULT_SUBMISSION_TIMEOUT_S, metavar="S",
                        help="seconds one whole submission may take (default %(default)s)")
        sp.add_argument("--memory-limit", type=float, default=DEFAULT_MEMORY_LIMIT_GIB, metavar="GIB",
                        help="GiB one submission's notebook and kernel may use together (default %(default)s)")

    c = sub.add_parser("check", help="grade one notebook with the lab's hidden tests")
    c.add_argument("notebook", type=Path)
    c.add_argument("--lab", help="lab id, when the file name does not say (e.g. 00_measure)")
    c.add_argument("--json", action="store_true", help="print JSON instead of text")
    c.add_argument("--verbose", action="store_true", help="also print nbgrader's full output (on stderr)")
    limits(c)
    c.add_argument("--unsandboxed", action="store_true", help="run the notebook as you, without the sandbox")

    g = sub.add_parser("grade", help="autograde every submission of an nbgrader course")
    g.add_argument("course_dir", type=Path)
    g.add_argument("assignment", nargs="?", help="only this assignment (default: all)")
    g.add_argument("--csv", type=Path, help="where to write scores (default COURSE_DIR/grades.csv)")
    g.add_argument("--regrade", action="store_true",
                   help="grade every submission again, also those unchanged since they were graded")
    g.add_argument("--unsandboxed", action="store_true",
                   help="grade without the OS sandbox where none can be made (grades.csv says sandbox=none)")
    side = g.add_mutually_exclusive_group()
    side.add_argument("--workers", type=int, metavar="N",
                      help="grade N submissions side by side on this machine, each on its own cores (a local Ray)")
    side.add_argument("--ray", metavar="ADDRESS",
                      help="grade in the grading slots of the Ray cluster at ADDRESS (docs: instructors/cluster)")
    uncalibrated(g)
    limits(g)

    v = sub.add_parser("serve", help="grade each submission as it arrives in nbgrader's exchange, and release "
                       "its feedback (docs: instructors/serve)")
    v.add_argument("course_dir", type=Path)
    v.add_argument("--status", metavar="STUDENT", help="print STUDENT's own submissions (queue place, estimated wait, "
                   "result or why not graded) and exit")
    v.add_argument("--json", action="store_true", help="with --status: print JSON instead of text")
    v.add_argument("--once", action="store_true", help="grade what is there, then exit (tests, cron)")
    v.add_argument("--poll", type=float, default=10.0, metavar="S",
                   help="seconds between looks at the exchange (default %(default)s)")
    v.add_argument("--rate", default="5/24", metavar="N/HOURS",
                   help="at most N gradings of one student's lab in any HOURS (default %(default)s)")
    v.add_argument("--max-mb", type=float, default=50.0, metavar="MB",
                   help="a larger submission is refused before grading (default %(default)s)")
    v.add_argument("--unsandboxed", action="store_true",
                   help="grade without the OS sandbox where none can be made")
    vside = v.add_mutually_exclusive_group()
    vside.add_argument("--workers", type=int, metavar="N", help="grade N submissions side by side on this machine")
    vside.add_argument("--ray", metavar="ADDRESS", help="grade in the grading slots of the Ray cluster at ADDRESS")
    uncalibrated(v)
    limits(v)

    h = sub.add_parser("report", help="write the cohort report (HTML) from what grade recorded")
    h.add_argument("course_dir", type=Path)
    h.add_argument("--out", type=Path, help="where to write it (default COURSE_DIR/cohort-report.html)")

    r = sub.add_parser("release", help="write the student bundle: learner notebooks, course/, no answers")
    r.add_argument("dest", type=Path, help="a new or empty folder")

    sub.add_parser("colab", help="write each lab's setup cell and Colab badge from pyproject's [tool.course-kit]")

    k = sub.add_parser("calibrate", help="can each tier tell the reference from a degraded copy on this machine?",
                       epilog="Exit code 1 when a tier did not separate the reference from its degraded copy, "
                              "or (--workers N) when a lab's solution lost a point graded N at a time.")
    k.add_argument("lab", nargs="?")
    k.add_argument("--runs", type=int, default=1, metavar="N", help="measure N times (default %(default)s)")
    k.add_argument("--workers", type=int, default=1, metavar="N",
                   help="N calibrations side by side, each on one grading slot's cores, as grade --workers N grades; "
                        "then each lab's solution graded N at a time")
    k.add_argument("--json", action="store_true", help="print JSON instead of text")
    k.add_argument("--in-process", action="store_true",
                   help="measure both copies in this process, not sandboxed as grading runs them (faster, less faithful)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        with sigterm_as_ctrl_c():
            return _run(args)
    except KeyboardInterrupt:
        print(f"{args.command}: interrupted; what it had started is stopped", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace) -> int:
    """Do the command ``args`` names; its exit code."""
    lim = {}
    if args.command in ("check", "grade", "serve"):
        lim = {"cell_timeout_s": args.cell_timeout, "timeout_s": args.timeout, "memory_limit_gib": args.memory_limit}
    try:
        if args.command == "check":
            from . import selfcheck

            return selfcheck.run(args.notebook, args.lab, as_json=args.json, verbose=args.verbose,
                                 unsandboxed=args.unsandboxed, **lim)
        if args.command == "serve" and args.status:
            from .grader.service import serve

            return serve.print_status(args.course_dir, args.status, as_json=args.json)
        if args.command in ("grade", "serve", "calibrate", "release", "colab"):
            from .selfcheck import answer_keys

            if not answer_keys():
                raise SetupError(f"this is a student bundle: `{args.command}` needs the instructor's kit "
                                 "(the repository, with solutions/ and each lab's reference/)")
        if args.command == "grade":
            from .grader.engine import cohort

            return cohort.run(args.course_dir, args.assignment, csv_path=args.csv, sandboxed=not args.unsandboxed,
                              regrade=args.regrade, workers=args.workers, ray_address=args.ray,
                              uncalibrated=args.uncalibrated, **lim)
        if args.command == "serve":
            from .grader.service import serve
            from .grader.service.submission_queue import Rate

            try:
                rate = Rate.parse(args.rate)
            except ValueError as exc:
                raise SetupError(f"--rate: {exc}") from None
            options = serve.Options(rate=rate, max_bytes=args.max_mb * 2**20, poll_s=args.poll)
            return serve.main(args.course_dir, workers=args.workers, ray_address=args.ray, once=args.once,
                              sandboxed=not args.unsandboxed, options=options, uncalibrated=args.uncalibrated, **lim)
        if args.command == "report":
            from .grader.engine import cohort_report

            if not (args.course_dir / "nbgrader_config.py").exists():
                raise SetupError(f"{args.course_dir} is not an nbgrader course (no nbgrader_config.py)")
            print(f"wrote {cohort_report.write(args.course_dir, out=args.out)}")
            return 0
        if args.command == "colab":
            from . import colab

            return colab.run()
        if args.command == "release":
            from . import release

            return release.run(args.dest)
        from . import calibrate

        return calibrate.run(args.lab, runs=args.runs, as_json=args.json, workers=args.workers,
                             in_process=args.in_process)
    except (SetupError, UnknownLab) as exc:  # the user's mistake; a grader bug keeps its traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
