"""Each lab's solution graded with ``--workers 2`` beside a hostile neighbour (issue 53): does the
neighbour ever cost the solution a point? Rerun with::

    python tests/neighbours_measure.py --labs 00_measure 04_data_affinity --kinds disk memory --runs 5

The neighbour is lab 00's blank with one cell first that loads the machine from its own slot for
``--seconds`` (its cell timeout is the default 240 s, so at most 230 s a cell): ``cpu`` spins on
every core it may use, ``memory`` copies 256 MiB arrays (memory bandwidth, caches), ``disk``
writes 1.5 GiB files into its capped work folder and deletes them (page cache, the tmpfs), and
``procs`` starts short processes in bursts of 50. Both are graded sandboxed, 2 slots on this
machine, as ``grade --workers 2`` grades students (``--uncalibrated``: the measurement is what
calibration would decide). Prints one line a run: the solution's score, and what the grading
measured again with its neighbour held (:mod:`autograder.grader.isolation.neighbours`)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from notebooks import make_course, released, submit, variant  # noqa: E402

LOADS = {
    "cpu": "import multiprocessing as mp, os, time\n"
           "def spin(until):\n    while time.time() < until:\n        pass\n"
           "until = time.time() + {seconds}\n"
           "workers = [mp.Process(target=spin, args=(until,)) for _ in range(4)]\n"
           "[w.start() for w in workers]; [w.join() for w in workers]",
    "memory": "import numpy as np, threading, time\n"
              "def copy(until):\n    a, b = np.ones(2**25), np.empty(2**25)\n"
              "    while time.time() < until:\n        np.copyto(b, a)\n"
              "until = time.time() + {seconds}\n"
              "ts = [threading.Thread(target=copy, args=(until,)) for _ in range(2)]\n"
              "[t.start() for t in ts]; [t.join() for t in ts]",
    "disk": "import os, time\nfrom IPython.paths import get_ipython_dir\n"
            "path, block, until = os.path.join(get_ipython_dir(), 'fill'), b'x' * 2**24, time.time() + {seconds}\n"
            "while time.time() < until:\n"
            "    try:\n        with open(path, 'wb') as f:\n"
            "            for _ in range(96):\n                f.write(block)\n"
            "    except OSError:\n        pass\n"
            "    os.remove(path)",
    "procs": "import subprocess, time\nuntil = time.time() + {seconds}\n"
             "while time.time() < until:\n"
             "    burst = [subprocess.Popen(['true']) for _ in range(50)]\n"
             "    [p.wait() for p in burst]",
}
NEIGHBOUR, SOLUTION = "a-neighbour", "b-solution"


def one(lab: str, kind: str, seconds: int, tmp: Path) -> dict:
    """Grade ``lab``'s solution beside a ``kind`` neighbour, 2 slots; what the solution got."""
    from autograder.grader.engine import cohort_report

    labs = sorted({lab, "00_measure"})
    course = make_course(tmp / "course", labs)
    submit(course, SOLUTION, lab, variant(lab, tmp / "solution.ipynb"))
    load = LOADS[kind].replace("{seconds}", str(seconds))
    submit(course, NEIGHBOUR, "00_measure", variant("00_measure", tmp / "neighbour.ipynb", base=released("00_measure"),
                                                    demos=False, after={"setup": [load]}))
    started = time.monotonic()
    code = subprocess.run([sys.executable, "-m", "autograder", "grade", str(course), "--workers", "2",
                           "--uncalibrated"], stdin=subprocess.DEVNULL, capture_output=True, text=True).returncode
    got = {o.student: o for o in cohort_report.recorded(course)}
    solution = got[SOLUTION]
    log = course / "autograded" / SOLUTION / lab / "autograde.log"
    held = [line for line in (log.read_text().splitlines() if log.exists() else []) if "| neighbours]" in line]
    lost = [r.name for r in solution.results if r.score < r.max_score]
    return {"lab": lab, "kind": kind, "code": code, "score": solution.score, "max": solution.max_score,
            "lost": lost, "held": held, "seconds": time.monotonic() - started}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labs", nargs="+", default=["00_measure"])
    parser.add_argument("--kinds", nargs="+", default=sorted(LOADS), choices=sorted(LOADS))
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seconds", type=int, default=220)
    args = parser.parse_args(argv)
    full = True
    for run in range(args.runs):
        for lab in args.labs:
            for kind in args.kinds:
                with tempfile.TemporaryDirectory(prefix="neighbours-") as tmp:
                    r = one(lab, kind, args.seconds, Path(tmp))
                full &= not r["lost"]
                print(f"run {run + 1} {lab} beside {kind}: {r['score']:g}/{r['max']:g}"
                      + (f" lost {', '.join(r['lost'])}" if r["lost"] else "") + f" ({r['seconds']:.0f} s)"
                      + "".join(f"\n    {h}" for h in r["held"]), flush=True)
    return 0 if full else 1


if __name__ == "__main__":
    sys.exit(main())
