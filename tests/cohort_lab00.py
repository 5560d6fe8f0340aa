"""The one lab 00 cohort CI grades through ``cohort.run``, shared by tests/test_grading_lab00.py
(broken submissions lose only their own points) and tests/test_sandbox_attacks.py (the OS
attacker gets nothing out): one cohort, not two, saves a solution grading and a course's
set-up (about two minutes of a slow 2-core CI machine).

Graded in this order: the OS attacker (the blank, with :mod:`attacks_os`' probe after its last
graded cell), the solution right after it (the honest student whose grade the attacker must not
touch), then the broken and hostile submissions of tests/test_grading_lab00.py."""

from __future__ import annotations

import attacks_os
from notebooks import answer_cells, released, sandboxed, variant
from os_cohort import grade_cohort

LAB = "00_measure"
SEED = "12345"
SOLUTION = "alice-solution"  # the honest student graded right after the attacker
MEMORY_LIMIT_GIB = 8  # lab 00's kernel with its own Ray uses well under 2 GiB; the attacker fills its 2 GiB /tmp
LIMITS = {"cell_timeout_s": 45, "timeout_s": 600, "memory_limit_gib": MEMORY_LIMIT_GIB}
ENV = {"AUTOGRADER_SEED": SEED,            # deterministic workloads, so fakes can be checked
       "AUTOGRADER_CALL_TIMEOUT_S": "20"}  # a hang costs 20 s, not 60
SHUTDOWN = "import ray\nray.shutdown()"  # learners do, to "clean up"


def broken(tmp) -> dict:
    """Student -> notebook: the broken and hostile submissions graded after the solution."""
    empty = answer_cells(released(LAB))
    return {
        # grows its memory past the cohort's cap in a cell of its own; the next student is graded normally
        "carl-memory-bomb": variant(LAB, tmp / "c.ipynb", base=released(LAB), demos=False, after={"setup": [
            "import time\nhoard = []\nfor _ in range(400):\n    hoard.append(bytearray(64 * 2**20))\n"
            "    time.sleep(0.02)"]}),
        "dave-hangs": variant(LAB, tmp / "d.ipynb", demos=False, replace={
            "throughput": "def throughput(fn, items):\n    while True:\n        pass",
            "best_batch_size": empty["best_batch_size"]},  # left blank: the hangs are what is graded
            # a demonstration cell calls the hanging function before any graded cell does
            after={"throughput": ["rate = throughput(lambda: None, 1)"], "submit_batch": ["while True:\n    pass"]}),
        # tries to exit, writes to fd 2, and shuts Ray down before every graded cell
        "erin-exits": variant(LAB, tmp / "e.ipynb", demos=False, after={
            "throughput": ["exit()", "import os\nos._exit(0)", "import sys\nsys.exit(3)", SHUTDOWN],
            **{gid: [SHUTDOWN] for gid in ("test-throughput-known-cost", "test-throughput-sync",
                                           "test-throughput-warmup", "best_batch_size", "test-batch-model",
                                           "test-batch-real-tier1", "submit_batch")},
            # noise written to file descriptor 2 from a background thread, as Ray's C++ core does
            "setup": ["import os, threading, time as _t\n"
                      "def _noise():\n"
                      "    while True:\n"
                      "        os.write(2, b'[raylet] simulated core warning\\n')\n"
                      "        _t.sleep(0.5)\n"
                      "threading.Thread(target=_noise, daemon=True).start()"]}),
        # zeroes every grade in the gradebook it grades in (a scratch copy), then hunts the disk
        # for the course's real one (any other gradebook next to a submission of its own); the
        # blank's code otherwise (what it earns is not what is tested: alice's grade is)
        "ivan-gradebook": variant(LAB, tmp / "i.ipynb", base=released(LAB), demos=False, after={"setup": [
            "import os, pathlib, sqlite3\n"
            "here = pathlib.Path.cwd()\n"
            "mine = next(p / 'gradebook.db' for p in here.parents if (p / 'gradebook.db').exists())\n"
            "found = [pathlib.Path(d) / 'gradebook.db' for d, _, files in os.walk('/tmp') if 'gradebook.db' in files\n"
            "         and (pathlib.Path(d) / 'submitted' / 'ivan-gradebook').is_dir()]\n"
            "for db in [mine] + [f for f in found if f != mine]:\n"
            "    with sqlite3.connect(db) as con:\n"
            "        con.execute('update grade set auto_score = 0')"]}),
        "judy-kills-kernel": variant(LAB, tmp / "j.ipynb", demos=False, after={"throughput": [
            "import ctypes\nlibc = ctypes.CDLL(None)\nlibc.kill(libc.getpid(), 9)"]}),
    }


def attack_cells(T) -> list[str]:
    """The OS attacker's cells: every capability the probe knows, then /tmp and its IPython
    profile's folder filled, then a fork bomb."""
    return [attacks_os.cell(T, "attacker", skip=("fill-", "fork-")),
            attacks_os.cell(T, "attacker-fill", only=["fill-tmp", "fill-ipython"]),
            attacks_os.cell(T, "attacker-fork", only=["fork-bomb"])]


def grade(tmp, monkeypatch) -> dict:
    """Grade the cohort in ``tmp`` (see the module's docstring); :func:`os_cohort.grade_cohort`'s
    record. Where no sandbox can be made the attacker is the blank alone: its probe signals and
    writes what it can reach, and unsandboxed that is the machine (tests/test_sandbox_attacks.py
    then skips)."""
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    boxed = sandboxed()
    return grade_cohort(tmp, LAB, attack_cells if boxed else (lambda T: []), base=released(LAB), honest=SOLUTION,
                        others=broken(tmp), sandboxed=boxed, **LIMITS)
