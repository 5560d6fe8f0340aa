"""``python -m autograder calibrate [LAB] [--runs N] [--workers N] [--json] [--in-process]``: can each tier tell good from bad here?

A tier is fair only if the reference passes it every time and a clearly worse implementation
fails it every time, on the machine that grades. For every tiered (measured) check, this runs
the grader's own measurement -- the same rounds, interleaved as grading interleaves them, a
fresh seed each run -- twice per run: the reference against itself, and a deliberately
degraded copy of the reference against the reference (half its speed, or the worst choice:
each lab's ``autograder/labs/labNN/reference``'s ``degraded()``). It reports min / median / max of both
ratios and whether the top tier separated them in every run.

A lab's checks module may also define ``calibrate(session)``, returning lines about numbers behind
its untiered checks (printed once, after the table).
"""

from __future__ import annotations

import importlib
import json
import os
import statistics
import sys
from dataclasses import asdict, dataclass, field

from course import backend

from .grader.session.catalog import checks_module, for_lab, tiered
from .labs import needs_ray, ray_start
from .selfcheck import labs


@dataclass
class Calibration:
    """One tiered measurement on this machine: its ratios over the runs, for both copies."""

    lab: str
    check: str
    tiers: tuple[float, ...]
    reference: list[float] = field(default_factory=list)  # reference vs itself, one per run
    degraded: list[float] = field(default_factory=list)   # degraded copy vs the reference
    errors: list[str] = field(default_factory=list)

    @property
    def separates(self) -> bool:
        """The reference passed the top tier in every run and the degraded copy failed it in every run."""
        top = self.tiers[-1]
        return (bool(self.reference) and not self.errors and min(self.reference) >= top
                and bool(self.degraded) and max(self.degraded) < top)

    def summary(self) -> dict:
        return {**asdict(self), "reference_stats": stats(self.reference),
                "degraded_stats": stats(self.degraded), "separates": self.separates}

    def line(self) -> str:
        r, d = stats(self.reference), stats(self.degraded)
        show = lambda s: f"{s['min']:.2f} / {s['median']:.2f} / {s['max']:.2f}" if s else "-"  # noqa: E731
        verdict = "ok" if self.separates else "DOES NOT SEPARATE"
        text = (f"{self.lab} {self.check:<22} tiers {'/'.join(f'{t:g}' for t in self.tiers):<10} "
                f"reference {show(r):<20} degraded {show(d):<20} {verdict}")
        return text + "".join(f"\n    error: {e}" for e in self.errors)


def stats(values: list[float]) -> dict:
    """min / median / max of a list of ratios (empty dict for none)."""
    if not values:
        return {}
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def _start_ray(lab: str) -> None:
    """The lab's Ray in this process, as the reference process starts it while grading."""
    if needs_ray(lab):
        from .kernel.routines import STEPS

        STEPS[ray_start(lab)]()


def measure(lab: str, runs: int, copies: tuple[str, ...] = ("reference", "degraded"), *,
            sandboxed: bool = False) -> list[Calibration]:
    """Every tiered measurement of ``lab``, ``runs`` times for each of ``copies``, on fresh seeds.

    ``sandboxed``: each copy in a learner's sandbox and the reference in its grading process,
    a fresh session per run and copy, as grading measures a kernel
    (:mod:`autograder.grader.engine.calibration_session`); otherwise all in this process.
    """
    out = [Calibration(lab, t.name, t.thresholds) for t in tiered(lab)]
    if sandboxed:
        from .grader.engine.calibration_session import sandboxed as session_of

        for _ in range(runs):
            for kind in copies:
                try:
                    with session_of(lab, kind) as session:
                        _measure_into(out, session, kind)
                except (RuntimeError, OSError) as exc:  # the sandbox or the reference process failed
                    for cal in out:
                        cal.errors.append(f"{kind}: {type(exc).__name__}: {str(exc)[:200]}")
        return out
    from .grader.session.catalog import reference as namespace
    from .grader.session.session import Session
    from .transport import Learner

    made = {"reference": lambda: namespace(lab), "degraded": lambda: namespace(lab)["degraded"]()}
    namespaces = {kind: made[kind]() for kind in copies}
    _start_ray(lab)
    try:
        for _ in range(runs):
            for kind, ns in namespaces.items():
                _measure_into(out, Session(lab, learner=Learner(namespace=ns)), kind)
    finally:
        from course import cluster

        cluster.stop()
    return out


def _measure_into(out: list[Calibration], session, kind: str) -> None:
    """Each tiered ratio of the session's lab, measured once with ``kind`` as the learner, over
    every round (grading may stop once the tiers' verdicts are decided; its verdicts are the ones
    the medians of every round give, which are what is reported here)."""
    session.early_stop = False
    for cal, t in zip(out, tiered(session.lab)):
        try:
            getattr(cal, kind).append(float(t.measure(session).ratio))
        except AssertionError as exc:  # e.g. a measurement that could not run here
            cal.errors.append(f"{kind}: {str(exc)[:200]}")


def notes(lab: str) -> list[str]:
    """The lab module's own calibration lines (numbers behind its untiered checks), if any."""
    module = importlib.import_module(checks_module(lab))
    if not hasattr(module, "calibrate"):
        return []
    from .grader.session.catalog import reference as namespace
    from .grader.session.session import Session
    from .transport import Learner

    return list(module.calibrate(Session(lab, learner=Learner(namespace=namespace(lab)))))


def run(lab: str | None = None, *, runs: int = 1, as_json: bool = False, workers: int = 1,
        in_process: bool = False) -> int:
    """Print the calibration; exit code 0 when every tier separated the copies, else 1.

    Each copy is measured in a learner's sandbox, as grading measures a kernel, where one can be
    made here; ``in_process`` (or no sandbox here, said in one line) measures both in this process.
    ``workers`` > 1: that many calibrations at once, one per grading slot's cores, then each lab's
    solution graded that many at a time (:mod:`autograder.grader.engine.fair_timing`); exit code 1 also
    when a solution lost a point. Either way the verdict is kept for ``grade --workers``.
    """
    from .grader.engine import fair_timing
    from .grader.isolation import sandbox

    chosen = [lab] if lab else labs()
    for name in chosen:
        for_lab(name)
    if workers > 1:
        return _side_by_side(lab, chosen, workers, runs, in_process)
    rows, extra = [], {}
    # the table goes to stdout as text, or to stderr as it is measured when stdout is JSON
    # (a long --runs N run shows its progress, and its rows survive in the log)
    out = sys.stderr if as_json else sys.stdout
    why = "told --in-process" if in_process else sandbox.unavailable()
    print(f"hardware: {backend.facts()} ({backend.fingerprint()}); {runs} run(s); ratios min / median / max",
          file=out, flush=True)
    print("each copy measured in a learner's sandbox, as grading measures a kernel" if not why else
          f"both copies measured in this process, not sandboxed as grading runs them ({why})", file=out, flush=True)
    for name in chosen:
        found = measure(name, runs, sandboxed=not why) if tiered(name) else []
        rows += found
        extra[name] = notes(name)
        for cal in found:
            print(cal.line(), file=out, flush=True)
        for text in extra[name]:
            print(f"{name}: {text}", file=out, flush=True)
    if as_json:
        print(json.dumps({"hardware": asdict(backend.facts()), "fingerprint": backend.fingerprint(), "runs": runs,
                          "checks": [c.summary() for c in rows], "notes": extra}, indent=2))
    if not os.environ.get(fair_timing.COPY_ENV):  # one copy of calibrate --workers N records nothing itself
        fair_timing.record(1, {f"{c.lab}/{c.check}": c.separates for c in rows})
    return 0 if all(c.separates for c in rows) else 1


def _side_by_side(lab: str | None, chosen: list[str], workers: int, runs: int, in_process: bool) -> int:
    """``calibrate --workers N``: the tiers N at a time, then each lab's solution graded N at a
    time (:mod:`autograder.grader.engine.fair_timing`), kept for ``grade --workers``; its exit code."""
    from .grader.engine import fair_timing

    verdict = fair_timing.measure(lab, workers, runs, in_process=in_process)
    lost = fair_timing.grade_solutions(chosen, workers, runs, sandboxed=not in_process)
    fair_timing.record(workers, verdict, lost=lost)
    for key, ok in sorted(verdict.items()):
        print(f"{workers} side by side: {key:<34} {'ok' if ok else 'DOES NOT SEPARATE'}")
    for name, what in sorted(lost.items()):
        print(f"{workers} side by side: {name + ' solution':<34} "
              f"{'LOST ' + ', '.join(what) if what else 'full marks in every slot'}")
    try:
        wide = fair_timing.widths(workers, set(chosen))
    except fair_timing.Unfit as exc:
        print(f"note: {exc}")
        wide = {}
    for name, width in sorted((k, w) for k, w in wide.items() if w > 1):
        print(f"note: {name} needs more cores than one of {workers} slots has (min_slot_cores): grade --workers "
              f"{workers} gives each of its gradings {width} slots here, so it grades {workers // width} at a time")
    return 0 if all(verdict.values()) and not any(lost.values()) else 1
