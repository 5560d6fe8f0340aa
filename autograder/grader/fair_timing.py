"""``calibrate --workers N``: do the tiers still separate good work from bad when N gradings run
side by side on this machine? And ``grade --workers N`` asking what it found.

A grading study of ReCodEx saw wall-clock errors above 5 % with 6 parallel workers on a 20-core
server. The kit's tiers are ratios to a reference measured interleaved in the same slot, which
should cancel most of it -- this measures whether it does. N copies of ``calibrate`` run at
once, each pinned to one slot's cores (:func:`autograder.grader.slots.split`, the cut ``grade
--workers N`` makes), each measuring the reference and its degraded copy as ``calibrate``
always does. A tier separates at N when it separated in every copy.

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

from .processes import SAFE_PATH
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
    copies = []
    for k in range(workers):
        copies.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       env={**os.environ, COPY_ENV: str(k)},
                                       preexec_fn=lambda c=cores[k]: os.sched_setaffinity(0, c)))
    verdict: dict[str, bool] = {}
    for k, proc in enumerate(copies):
        out, err = proc.communicate()
        try:
            found = _report(out)["checks"]
        except (ValueError, KeyError):
            raise RuntimeError(f"calibration copy {k} (cores {cores[k]}) ended with code {proc.returncode} and no "
                               f"report: {(err or out)[-800:]}") from None
        for line in err.splitlines():
            if line.strip():
                print(f"[slot {k}, cores {cores[k]}] {line}", flush=True)
        for check in found:
            key = f"{check['lab']}/{check['check']}"
            verdict[key] = verdict.get(key, True) and bool(check["separates"])
    return verdict


def _report(out: str) -> dict:
    """calibrate's JSON report: the object that starts on a line of its own (``{``), after whatever
    else the copy's Ray workers printed to its stdout."""
    starts = [m.start() for m in re.finditer(r"^\{$", out, re.M)]
    if not starts:
        raise ValueError("no JSON report")
    return json.JSONDecoder().raw_decode(out[starts[-1]:])[0]


def record(workers: int, verdict: dict[str, bool], path: Path = RECORD) -> None:
    """Keep ``verdict`` for this machine at this concurrency (merged: a check measured again replaces its entry)."""
    data = _read(path)
    entry = data.setdefault(_machine(), {}).setdefault(str(workers), {"checks": {}})
    entry["checks"].update(verdict)
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
    from ..labs import UnknownLab
    from .catalog import tiered

    keys = set()
    for lab in labs:
        try:
            keys |= {f"{lab}/{t.name}" for t in tiered(lab)}
        except UnknownLab:
            pass
    return keys


def too_few_cores(workers: int, labs: set[str], cores: int | None = None) -> list[str]:
    """The labs of ``labs`` whose grades need more cores a slot (:func:`autograder.labs.min_slot_cores`)
    than ``workers`` slots on this machine's ``cores`` get, each said with what it needs."""
    from ..labs import UnknownLab, min_slot_cores

    cores = len(os.sched_getaffinity(0)) if cores is None else cores
    per_slot = min(len(s) for s in split(list(range(cores)), workers))
    short = []
    for lab in sorted(labs):
        try:
            need = min_slot_cores(lab)
        except UnknownLab:
            continue
        if per_slot < need:
            short.append(f"{lab} needs {need} cores a grading slot, and {workers} slots on {cores} cores get {per_slot}")
    return short


def allowed(workers: int, labs: set[str], path: Path = RECORD, *, uncalibrated: bool = False,
            cores: int | None = None) -> tuple[bool, str]:
    """Whether ``grade --workers workers`` may grade ``labs`` here, and what calibrate found.

    Refused first, whatever calibrate found: a lab whose grades need more cores a slot than
    ``workers`` slots of this machine's ``cores`` get (:func:`too_few_cores`).

    Refused: a tier of one of ``labs`` that separated one at a time (``calibrate`` without
    ``--workers``, or ``--workers 1``) but not ``workers`` at a time; and a tier never measured
    ``workers`` at a time here, unless ``uncalibrated`` (then said). A tier that did not
    separate one at a time either is the lab's calibration problem, not concurrency's: said, not refused.
    """
    if short := too_few_cores(workers, labs, cores):
        return False, (f"{'; '.join(short)}: grade with fewer workers, or on more cores (a check of these labs "
                       f"is not timed against a reference beside it, so a starved slot costs honest work points)")
    here = _read(path).get(_machine(), {})
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
