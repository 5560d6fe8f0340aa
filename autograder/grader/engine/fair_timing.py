"""``calibrate --workers N``: do the tiers still separate good work from bad when N gradings run
side by side on this machine? And ``grade --workers N`` asking what it found.

A grading study of ReCodEx saw wall-clock errors above 5 % with 6 parallel workers on a 20-core
server. The kit's tiers are ratios to a reference measured interleaved in the same slot, which
should cancel most of it -- this measures whether it does. N copies of ``calibrate`` run at
once, each pinned to one slot's cores (:func:`autograder.grader.engine.slots.split`, the cut ``grade
--workers N`` makes), each measuring the reference and its degraded copy as ``calibrate``
always does. A tier separates at N when it separated in every copy.

A check with no reference timed beside it (lab 01's throughput model, lab 03's isolation) is
not cancelled by the ratio: a starved slot costs honest work points there. So ``calibrate
--workers N`` also grades each lab's solution N at a time, one per slot, as ``check`` grades a
notebook, and keeps what each lost: ``grade --workers N`` refuses a lab whose solution lost a
point N at a time on this machine. Each lab's ``min_slot_cores`` (:class:`autograder.labs.LabSpec`)
is the floor this measured on a 2-core machine: where calibrate never ran too, a grading of a lab
that needs more cores than a slot has takes as many slots as it needs (:func:`widths`).

The verdict is kept per machine and concurrency in ``~/.cache/autograder/calibration.json``.
``grade --workers N`` (and ``serve --workers N``) grades side by side only where every tier of
the labs it grades has separated N at a time on this machine: it refuses a tier measured not to
separate at N, and one never measured at N unless told ``--uncalibrated``. A lab without tiers
(nothing timed against a reference) needs no calibration.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from ..nbgrading.nbgrader_run import KIT_ROOT
from ..isolation.processes import SAFE_PATH, end
from .slots import split

RECORD = Path.home() / ".cache" / "autograder" / "calibration.json"
COPY_ENV = "AUTOGRADER_CALIBRATION_COPY"  # set in each of the N copies


def _machine() -> str:
    from course import backend

    return backend.fingerprint()


def measure(lab: str | None, workers: int, runs: int, *, in_process: bool = False) -> dict[str, bool]:
    """Run ``workers`` calibrations at once, one per slot; check id -> separated in every copy."""
    cores = split(list(os.sched_getaffinity(0)), workers)
    argv = [sys.executable, *SAFE_PATH, "-m", "autograder", "calibrate", *([lab] if lab else []), "--runs", str(runs),
            "--json", *(["--in-process"] if in_process else [])]
    verdict: dict[str, bool] = {}
    for k, (out, err, code) in enumerate(_pinned(argv, cores, copy_env=True)):
        try:
            found = _report(out)["checks"]
        except (ValueError, KeyError):
            raise RuntimeError(f"calibration copy {k} (cores {cores[k]}) ended with code {code} and no "
                               f"report: {(err or out)[-800:]}") from None
        for line in err.splitlines():
            if line.strip():
                print(f"[slot {k}, cores {cores[k]}] {line}", flush=True)
        for check in found:
            key = f"{check['lab']}/{check['check']}"
            verdict[key] = verdict.get(key, True) and bool(check["separates"])
    return verdict


def grade_solutions(labs: list[str], workers: int, runs: int = 1, *, sandboxed: bool = True) -> dict[str, list[str]]:
    """Each lab's solution graded ``workers`` at a time, one per slot's cores, ``runs`` times;
    lab -> what it lost in any slot (check names, or why a grading failed; empty: full marks in
    every slot). Each slot's score is printed once its round ends."""
    cores = split(list(os.sched_getaffinity(0)), workers)
    lost: dict[str, list[str]] = {}
    for lab in labs:
        argv = check_argv(lab, sandboxed)
        lost[lab] = []
        for _ in range(runs):
            for k, (out, err, code) in enumerate(_pinned(argv, cores)):
                missed, line = _graded(out, err, code)
                print(f"[slot {k}, cores {cores[k]}] {lab} solution: {line}", flush=True)
                lost[lab] += [m for m in missed if m not in lost[lab]]
    return lost


def _pinned(argv: list[str], cores: list[tuple[int, ...]], *, copy_env: bool = False) -> list[tuple[str, str, int]]:
    """``argv`` run once per slot at the same time, each pinned to that slot's ``cores`` (and told
    its copy number where ``copy_env``); each one's stdout, stderr and exit code, in slot order."""
    copies = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, **({COPY_ENV: str(k)} if copy_env else {})},
                               preexec_fn=lambda c=c: os.sched_setaffinity(0, c))
              for k, c in enumerate(cores)]
    try:
        return [(*proc.communicate(), proc.returncode) for proc in copies]
    finally:  # stopped (Ctrl-C, SIGTERM): each copy ends what it started itself, then goes
        for proc in copies:
            end(proc, grace_s=15)


def check_argv(lab: str, sandboxed: bool) -> list[str]:
    """``python -m autograder check`` of the lab's solution, with a JSON report."""
    return [sys.executable, *SAFE_PATH, "-m", "autograder", "check", str(KIT_ROOT / "solutions" / lab / f"{lab}.ipynb"),
            "--lab", lab, "--json", *([] if sandboxed else ["--unsandboxed"])]


def _graded(out: str, err: str, code: int) -> tuple[list[str], str]:
    """One ``check --json`` of a solution: the checks it did not pass in full (or why it was not
    graded), and a line saying so."""
    try:
        report = _report(out)
        score, top = report["score"], report["max_score"]
    except (ValueError, KeyError):
        why = f"not graded (code {code}): {(err or out).strip()[-300:]}"
        return [why], why
    if report.get("error"):
        why = f"grading failed: {report['error'][:300]}"
        return [why], why
    missed = [c["name"] for c in report["checks"] if not c.get("skipped") and c["score"] < c["max_score"]]
    return missed, f"{score:g}/{top:g}" + (f", lost {', '.join(missed)}" if missed else " (full marks)")


def _report(out: str) -> dict:
    """A copy's JSON report (``calibrate``'s or ``check``'s): the object that starts on a line of
    its own (``{``), after whatever else the copy's Ray workers printed to its stdout."""
    starts = [m.start() for m in re.finditer(r"^\{$", out, re.M)]
    if not starts:
        raise ValueError("no JSON report")
    return json.JSONDecoder().raw_decode(out[starts[-1]:])[0]


def record(workers: int, verdict: dict[str, bool], path: Path = RECORD,
           lost: dict[str, list[str]] | None = None) -> None:
    """Keep ``verdict`` (and ``lost``, :func:`grade_solutions`'s) for this machine at this
    concurrency (merged: a check or lab measured again replaces its entry)."""
    data = _read(path)
    entry = data.setdefault(_machine(), {}).setdefault(str(workers), {"checks": {}})
    entry["checks"].update(verdict)
    entry.setdefault("solutions", {}).update(lost or {})
    entry["when"] = time.strftime("%Y-%m-%d %H:%M")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def wanted(labs: set[str]) -> set[str]:
    """The tiered checks (``lab/check``) of ``labs`` that calibrate measures; an assignment that
    is no lab of this kit has none."""
    from ...labs import UnknownLab
    from ..session.catalog import tiered

    keys = set()
    for lab in labs:
        try:
            keys |= {f"{lab}/{t.name}" for t in tiered(lab)}
        except UnknownLab:
            pass
    return keys


def widths(workers: int, labs: set[str], cores: int | None = None) -> dict[str, int]:
    """How many of ``workers`` slots (on this machine's ``cores``) one grading of each lab of
    ``labs`` takes: 1, or as many as its ``min_slot_cores`` (:class:`autograder.labs.LabSpec`)
    needs, so that such a lab grades fewer at a time rather than on fewer cores. Raises
    :class:`Unfit` for a lab that all the slots together cannot give its cores."""
    return widths_on([(workers, len(os.sched_getaffinity(0)) if cores is None else cores)], labs)


def widths_on(nodes: list[tuple[int, int]], labs: set[str]) -> dict[str, int]:
    """:func:`widths` on a cluster whose nodes offer ``(slots, cores)`` each: a grading asking Ray
    for that many slots may start on any node that has them free, so the width is the largest any
    node needs. Raises :class:`Unfit` where no node can give a lab its cores, or where a node
    that cannot would still be offered such a grading (it has that many slots)."""
    from ...labs import UnknownLab, min_slot_cores

    out = {}
    for lab in sorted(labs):
        try:
            need = min_slot_cores(lab)
        except UnknownLab:
            continue
        each = [(slots, cores, _width(need, slots, cores)) for slots, cores in nodes]
        fits = [w for _, _, w in each if w is not None]
        starved = [(slots, cores) for slots, cores, w in each if w is None and slots >= max(fits, default=1)]
        if not fits or starved:
            slots, cores = (starved or [(s, c) for s, c, _ in each])[0]
            raise Unfit(f"{lab} needs {need} cores a grading, and {slots} slots on {cores} cores cannot give "
                        f"them: grade with fewer workers, or on more cores")
        out[lab] = max(fits)
    return out


def _width(need: int, slots: int, cores: int) -> int | None:
    """How many of a node's ``slots`` (its ``cores`` split as :func:`autograder.grader.engine.slots.split`
    splits them) give ``need`` cores, whichever free ones are claimed; ``None``: none do."""
    sizes = sorted(len(s) for s in split(list(range(cores)), slots))  # the smallest sets must do
    width = next((w for w in range(1, slots + 1) if sum(sizes[:w]) >= need), None)
    if width is not None and width > 1 and slots > cores:  # slots sharing cores cannot add up to more
        return None
    return width


class Unfit(Exception):
    """A lab this machine's slots cannot give the cores its grades need."""


def allowed(workers: int, labs: set[str], path: Path = RECORD, *, uncalibrated: bool = False,
            cores: int | None = None) -> tuple[bool, str]:
    """Whether ``grade --workers workers`` may grade ``labs`` here, and what calibrate found.

    A lab whose grades need more cores than one slot gets takes several (:func:`widths`), so
    ``workers // width`` of its gradings run at once; its calibration is read at that
    concurrency, and one at a time needs none. Refused, whatever calibrate found: a lab that
    even all the slots cannot give its cores.

    Then, at each concurrency: refused, a lab whose solution calibrate graded that many at a
    time here and saw lose a point; a tier that separated one at a time (``calibrate`` without
    ``--workers``, or ``--workers 1``) but not that many at a time; and a tier never measured
    at it here, unless ``uncalibrated`` (then said). A tier that did not separate one at a time
    either is the lab's calibration problem, not concurrency's: said, not refused.
    """
    from ...labs import min_slot_cores

    try:
        wide = widths(workers, labs, cores)
    except Unfit as exc:
        return False, str(exc)
    together: dict[int, set[str]] = {}
    for lab in labs:
        together.setdefault(workers // wide.get(lab, 1), set()).add(lab)
    said = [f"{lab} needs {min_slot_cores(lab)} cores a grading, {wide[lab]} slots here: {workers // wide[lab]} at a time"
            for lab in sorted(wide) if wide[lab] > 1]
    for n, group in sorted(together.items(), reverse=True):
        if n > 1:
            ok, why = _allowed_at(n, group, path, uncalibrated)
            if not ok:
                return False, "; ".join([*said, why])
            said.append(why)
    return True, "; ".join(said) or "nothing to grade"


def _allowed_at(workers: int, labs: set[str], path: Path, uncalibrated: bool) -> tuple[bool, str]:
    """:func:`allowed` for ``labs`` graded ``workers`` at a time, each in one slot."""
    here = _read(path).get(_machine(), {})
    lost = {lab: what for lab, what in here.get(str(workers), {}).get("solutions", {}).items() if lab in labs and what}
    if lost:
        said = "; ".join(f"{lab} lost {', '.join(what)}" for lab, what in sorted(lost.items()))
        return False, (f"calibrate --workers {workers} graded these labs' solutions {workers} at a time on this machine "
                       f"and they lost points ({said}): grade with fewer workers, or on more cores")
    found = here.get(str(workers), {}).get("checks", {})
    alone = here.get("1", {}).get("checks", {})
    want = wanted(labs)
    missing = sorted(want - set(found))
    mine = {k: v for k, v in found.items() if k in want}
    broken = sorted(k for k, v in mine.items() if not v and alone.get(k, True))
    weak = sorted(k for k, v in mine.items() if not v and not alone.get(k, True))
    note = f"; not separating one at a time either: {', '.join(weak)}" if weak else ""
    if broken:
        return False, (f"calibrate --workers {workers} found tiers that do not separate the reference from its "
                       f"degraded copy with {workers} gradings side by side: {', '.join(broken)}{note}. "
                       f"Grade with fewer workers, or on more cores")
    if missing:
        labs_missing = sorted({k.split("/")[0] for k in missing})
        unknown = (f"whether these tiers still separate good work from bad with {workers} gradings side by side "
                   f"is not known on this machine: calibrate --workers {workers} has not measured "
                   f"{', '.join(missing)}")
        if uncalibrated:
            return True, f"warning: {unknown} (graded anyway: --uncalibrated){note}"
        how = "; ".join(f"python -m autograder calibrate {lab} --workers {workers}" for lab in labs_missing)
        return False, (f"{unknown}. Measure it first ({how}), grade with --workers 1, or pass --uncalibrated "
                       f"to grade side by side anyway")
    if not want:
        return True, f"no lab graded here has a timed tier: {workers} gradings side by side need no calibration"
    return True, f"calibrate --workers {workers} ({here[str(workers)].get('when', '?')}): every tier separates{note}"
