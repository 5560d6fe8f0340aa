"""Grading throughput, measured: one cohort graded serially, with ``--workers 2``, and with
``--ray`` on a two-node local cluster (``ray.cluster_utils.Cluster``, one slot per node).

Not a timed test -- a benchmark an instructor (or a session note) runs on the grading machine:

    python scripts/benchmark_grading.py [--labs 00_measure 01_actor_scaling] [--copies 2]

It prints, for each way of grading: the wall time, submissions per hour, the scaling
efficiency against the serial run (speed-up / slots), whether the scores equal the serial
run's, and what ``calibrate --workers N`` last recorded on this machine for that concurrency
(``python -m autograder calibrate --workers 2`` measures it). Then it projects the time for
200 learners x 6 labs on K machines from the per-lab seconds it measured.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from notebooks import make_course, released, submit, variant  # noqa: E402

from autograder.grader.engine import cohort, fair_timing  # noqa: E402
from autograder.grader.engine.slots import RESOURCE  # noqa: E402

LIMITS = {"cell_timeout_s": 240, "timeout_s": 1800, "memory_limit_gib": 4}


def cohort_of(course: Path, labs: list[str], copies: int, tmp: Path) -> int:
    """``copies`` solutions and blanks of each lab; the number of submissions."""
    n = 0
    for lab in labs:
        for k in range(copies):
            submit(course, f"solution{k}", lab, variant(lab, tmp / f"{lab}-{k}.ipynb"))
            submit(course, f"blank{k}", lab, released(lab))
            n += 2
    return n


def scores(course: Path) -> dict:
    with open(course / "grades.csv") as f:
        return {(r["student_id"], r["assignment"]): (r["score"], r["failed_checks"]) for r in csv.DictReader(f)}


def seconds_per_lab(course: Path) -> dict[str, float]:
    """Mean grading seconds per submission, per lab (grades.csv's own column)."""
    per: dict[str, list[float]] = {}
    with open(course / "grades.csv") as f:
        for r in csv.DictReader(f):
            per.setdefault(r["assignment"], []).append(float(r["seconds"]))
    return {lab: sum(v) / len(v) for lab, v in per.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--labs", nargs="+", default=["00_measure", "01_actor_scaling"])
    p.add_argument("--copies", type=int, default=2, help="solutions and blanks per lab (default 2)")
    args = p.parse_args()
    from ray.cluster_utils import Cluster

    tmp = Path(tempfile.mkdtemp(prefix="autograder-bench-"))
    base = make_course(tmp / "base", args.labs)
    n = cohort_of(base, args.labs, args.copies, tmp)
    runs = {}
    for name, slots, kwargs in (("serial", 1, {}), ("--workers 2", 2, {"workers": 2}), ("--ray, 2 nodes", 2, None)):
        course = tmp / name.replace(" ", "_").replace(",", "")
        shutil.copytree(base, course)
        cluster = None
        if kwargs is None:
            cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {RESOURCE: 1}})
            cluster.add_node(num_cpus=1, resources={RESOURCE: 1})
            cluster.wait_for_nodes()
            kwargs = {"ray_address": cluster.address}
        started = time.monotonic()
        try:
            cohort.run(course, **kwargs, **LIMITS)
        finally:
            if cluster is not None:
                cluster.shutdown()
                Path("/tmp/ray/ray_current_cluster").unlink(missing_ok=True)
        runs[name] = (time.monotonic() - started, slots, course)
    serial_s, _, serial_course = runs["serial"]
    print(f"\n{n} submissions ({', '.join(args.labs)}; {args.copies} solution(s) and blank(s) each)")
    for name, (wall, slots, course) in runs.items():
        same = scores(course) == scores(serial_course)
        found = fair_timing.allowed(slots, set(args.labs))[1] if slots > 1 else "-"
        print(f"{name:<16} {wall:7.0f} s  {3600 * n / wall:6.1f} submissions/h  efficiency "
              f"{serial_s / wall / slots:5.2f}  scores as serial: {'yes' if same else 'NO'}  calibrate: {found}")
    per = seconds_per_lab(serial_course)
    mean = sum(per.values()) / len(per)
    print("\nseconds per submission (serial): " + ", ".join(f"{lab} {s:.0f}" for lab, s in per.items()))
    eff = serial_s / runs["--workers 2"][0] / 2
    for k in (1, 4, 16):
        hours = 200 * 6 * mean / (k * 2 * eff) / 3600
        print(f"projection, 200 learners x 6 labs at {mean:.0f} s each (the labs measured here), {k} machine(s) "
              f"of 2 slots at efficiency {eff:.2f}: {hours:.1f} h")
    return 0


if __name__ == "__main__":
    sys.exit(main())
