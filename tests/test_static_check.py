"""The static check of learner cells (autograder.static_check): pure AST work, nothing runs.

Every solution and released lab passes with no finding; a table of hostile snippets each
gets the rule it should; a table of honest learner code gets none; and the notebook-level
parts (which cells count, aliases across cells, line numbers through IPython's magics) work.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from autograder.static_check import ALLOWED_IMPORTS, RULES, Finding, check_notebook, check_source
from notebooks import ROOT, released, solution

LABS = sorted(p.name for p in (ROOT / "solutions").iterdir() if (p / f"{p.name}.ipynb").exists())

# What the labs' locked setup cells bind, so that snippets read as they would in a lab.
SETUP = {"autograder": "autograder", "np": "numpy", "plt": "matplotlib.pyplot", "ray": "ray",
         "time": "time", "os": "os", "json": "json", "statistics": "statistics", "tempfile": "tempfile",
         "backend": "course.backend", "bench": "course.bench", "kernels": "course.kernels",
         "faults": "course.faults", "locality": "course.locality"}


# -- the kit's own notebooks -------------------------------------------------------------

def test_there_are_labs():
    assert len(LABS) >= 5


@pytest.mark.parametrize("lab", LABS)
def test_solution_has_no_findings(lab):
    assert [str(f) for f in check_notebook(solution(lab))] == []


@pytest.mark.parametrize("lab", LABS)
def test_released_lab_has_no_findings(lab):
    assert [str(f) for f in check_notebook(released(lab))] == []
    assert [str(f) for f in check_notebook(released(lab), source=solution(lab))] == []


@pytest.mark.parametrize("lab", LABS)
def test_every_import_in_the_labs_is_allowed(lab):
    """The allowlist is honest: every cell of every lab, the instructor's included, imports
    only what it allows (the setup cell's names are what learner cells build on)."""
    from autograder.colab import SETUP_ID

    nb = nbformat.read(solution(lab), as_version=4)
    for cell in nb.cells:  # but the kit's locked install cell: it runs pip, and nbgrader restores it
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade_id") != SETUP_ID:
            lines = [ln for ln in cell.source.splitlines() if ln.startswith(("import ", "from "))]
            found = check_source("\n".join(lines))
            assert [f for f in found if f.rule == "import-not-allowed"] == [], cell.source[:80]


# -- hostile snippets: each gets (at least) its rule ---------------------------------------

HOSTILE = [
    # imports outside the allowlist
    ("import sqlite3", "import-not-allowed"),
    ("from os import system", "import-not-allowed"),
    ("import subprocess as s\ns.run(['ls'])", "import-not-allowed"),
    ("import signal", "import-not-allowed"),
    ("import ctypes", "import-not-allowed"),
    ("import importlib\nimportlib.import_module('os')", "import-not-allowed"),
    ("import builtins", "import-not-allowed"),
    ("import pickle", "import-not-allowed"),
    ("import timeit\ntimeit.timeit('1')", "import-not-allowed"),
    ("import IPython", "import-not-allowed"),
    ("from IPython import get_ipython", "import-not-allowed"),
    ("from autograder.labs.lab03 import checks as lab03", "import-not-allowed"),
    ("import autograder.grader.session.session", "import-not-allowed"),
    ("from autograder.kernel import routines", "import-not-allowed"),
    ("from ray.util.state import list_actors", "import-not-allowed"),
    ("from ray.job_submission import JobSubmissionClient", "import-not-allowed"),
    ("import unittest.mock", "import-not-allowed"),
    ("from os import *", "import-not-allowed"),
    ("from . import helper", "import-not-allowed"),
    ("def f():\n    import multiprocessing", "import-not-allowed"),
    # forbidden names and attributes
    ("os.system('cat gradebook.db')", "forbidden-name"),
    ("os.kill(os.getpid(), 9)", "forbidden-name"),
    ("os.environ['RAY_ADDRESS'] = ''", "forbidden-name"),
    ("import os.path\nos.popen('ls')", "forbidden-name"),
    ("import sys\nsys.modules['time'] = fake", "forbidden-name"),
    ("sys.modules['course.bench'].measure", "forbidden-name"),
    ("sys._getframe(1).f_locals", "forbidden-name"),
    ("import sys\nsys.settrace(tracer)", "forbidden-name"),
    ("sys.setprofile(tracer)", "forbidden-name"),
    ("import threading\nthreading.settrace(tracer)", "forbidden-name"),
    ("import concurrent.futures\nconcurrent.futures.ProcessPoolExecutor()", "forbidden-name"),
    ("import asyncio\nasyncio.create_subprocess_shell('ls')", "forbidden-name"),
    ("gc.get_objects()", "forbidden-name"),
    ("inspect.stack()", "forbidden-name"),
    ("builtins.print = print", "forbidden-name"),
    ("__builtins__.print = print", "forbidden-name"),
    ("__builtins__['eval']", "forbidden-name"),
    ("globals()['__builtins__']", "forbidden-name"),
    ("g = globals()\ng['autograder'] = None", "forbidden-name"),
    ("locals()['x'] = 1", "forbidden-name"),
    ("vars(time)['perf_counter'] = lambda: 0.0", "forbidden-name"),
    ("vars()['x'] = 1", "forbidden-name"),
    ("type(x).__subclasses__()", "forbidden-name"),
    ("().__class__.__base__.__subclasses__()", "forbidden-name"),
    ("throughput.__globals__['time'] = fake", "forbidden-name"),
    ("throughput.__code__ = other.__code__", "forbidden-name"),
    ("fn.__closure__[0].cell_contents", "forbidden-name"),
    ("x.__class__ = Fake", "forbidden-name"),
    ("obj.__dict__['value'] = 1", "forbidden-name"),
    ("obj.__dict__.update(state)", "forbidden-name"),
    ("time.__dict__['sleep'] = fake", "forbidden-name"),
    ("try:\n    1 / 0\nexcept Exception as e:\n    e.__traceback__.tb_frame.f_back.f_globals",
     "forbidden-name"),
    ("callback.__self__", "forbidden-name"),
    ("bench.measure.__wrapped__", "forbidden-name"),
    ("class Gadget:\n    def __reduce__(self):\n        return (print, ('hi',))", "forbidden-name"),
    ("'{0.__globals__}'.format(fn)", "forbidden-name"),
    ("getattr(fn, '__globals__')", "forbidden-name"),
    ("np.ctypeslib.as_array(ptr)", "forbidden-name"),
    ("batch.ctypes.data", "forbidden-name"),
    ("ray.get_actor('ledger')", "forbidden-name"),
    ("ray._private.worker.global_worker", "forbidden-name"),
    ("autograder.grade('throughput-sync')", "forbidden-name"),
    ("autograder.begin('00_measure')", "forbidden-name"),
    ("autograder = None", "forbidden-name"),
    ("get_ipython().user_ns['x'] = 1", "forbidden-name"),
    ("shell = get_ipython", "forbidden-name"),
    ("breakpoint()", "forbidden-name"),
    ("exit()", "forbidden-name"),
    ("sys.exit(0)", "forbidden-name"),
    ("getattr(os, 'system')('ls')", "forbidden-name"),
    ("import shutil\nshutil.os.system('ls')", "forbidden-name"),    # a module another one imported
    ("faults.subprocess.run(['ls'])", "forbidden-name"),
    ("locality.gc.get_objects()", "forbidden-name"),
    ("from course.faults import signal", "import-not-allowed"),
    ("faults.ray.get_actor('ledger')", "forbidden-name"),
    # assignment to attributes of imported modules and objects
    ("time.perf_counter = lambda: 0.0", "module-attribute-assignment"),
    ("import time as t\nt.perf_counter = lambda: 0.0", "module-attribute-assignment"),
    ("from course import bench as b\nb.measure = fake", "module-attribute-assignment"),
    ("bench.measure = fake", "module-attribute-assignment"),
    ("import course.bench\ncourse.bench.measure = fake", "module-attribute-assignment"),
    ("from course.bench import measure\nmeasure.__defaults__ = (0,)", "module-attribute-assignment"),
    ("kernels.process = lambda b: b", "module-attribute-assignment"),
    ("ray.get = lambda r, **k: r", "module-attribute-assignment"),
    ("np.random.default_rng = fake", "module-attribute-assignment"),
    ("autograder.check = lambda *a: 1.0", "module-attribute-assignment"),
    ("del time.sleep", "module-attribute-assignment"),
    ("time.sleep += 0", "module-attribute-assignment"),
    ("time.sleep: object = fake", "module-attribute-assignment"),
    ("setattr(time, 'sleep', fake)", "module-attribute-assignment"),
    ("delattr(time, 'sleep')", "module-attribute-assignment"),
    ("time.__setattr__('sleep', fake)", "module-attribute-assignment"),
    ("t = time\nt.sleep = fake", "module-attribute-assignment"),
    ("(t := time).sleep = fake", "module-attribute-assignment"),
    ("(time or np).sleep = fake", "module-attribute-assignment"),
    ("def patch():\n    def inner():\n        time.sleep = fake\n    inner()", "module-attribute-assignment"),
    ("apply = lambda: setattr(bench, 'measure', fake)", "module-attribute-assignment"),
    ("for time.sleep in [fake]:\n    pass", "module-attribute-assignment"),
    ("locality.SHARD_IMAGES = 1", "module-attribute-assignment"),
    ("statistics.median.__code__ = f.__code__", "module-attribute-assignment"),
    ("xp = backend.xp()\nxp.asarray = list", "module-attribute-assignment"),
    ("backend.xp().asarray = list", "module-attribute-assignment"),
    ("from course.tenancy import QUOTAS\nQUOTAS.update(a=99)", "module-attribute-assignment"),
    ("locality.NODES_SEEN.clear()", "module-attribute-assignment"),
    # modules handed to code this check cannot follow
    ("def patch(m):\n    m.sleep = fake\npatch(time)", "module-as-value"),
    ("[time][0].sleep = fake", "module-as-value"),
    ("mods = {'t': time}", "module-as-value"),
    ("def clock(m=time):\n    return m", "module-as-value"),
    # strings run as code
    ("exec('print(1)')", "dynamic-code"),
    ("import base64\nexec(base64.b64decode(payload))", "dynamic-code"),
    ("eval('1 + 1')", "dynamic-code"),
    ("compile('x = 1', '<s>', 'exec')", "dynamic-code"),
    ("__import__('os').system('ls')", "dynamic-code"),
    ("run = eval", "dynamic-code"),
    ("faults.cold_start(code_string)", "dynamic-code"),
    ("%time __import__('os')", "dynamic-code"),
    ("data = np.load('x.npy', allow_pickle=True)", "dynamic-code"),
    ("import ray.cloudpickle", "import-not-allowed"),
    ("def g(x: \"os.system('ls')\"):\n    pass", "forbidden-name"),   # get_type_hints evaluates it
    ("box: list['__import__(\"os\")'] = []", "dynamic-code"),
    ("from typing import get_type_hints", "import-not-allowed"),
    ("traceback.walk_stack(None)", "forbidden-name"),
    # attribute names built at run time
    ("getattr(obj, '__glo' + 'bals__')", "computed-getattr"),
    ("getattr(obj, ''.join(['__', 'code', '__']))", "computed-getattr"),
    ("getattr(obj, f'__{name}__')", "computed-getattr"),
    ("getattr(time, name)", "computed-getattr"),
    ("setattr(obj, name, value)", "computed-getattr"),
    ("delattr(obj, name)", "computed-getattr"),
    ("hasattr(os, secret)", "computed-getattr"),
    ("import operator\noperator.attrgetter(name)(obj)", "computed-getattr"),
    ("get = getattr\nget(obj, name)", "computed-getattr"),
    ("object.__setattr__(obj, name, value)", "computed-getattr"),
    # shell commands and magics
    ("!cat gradebook.db", "shell"),
    ("files = !ls ~", "shell"),
    ("if True:\n    !rm -rf /tmp/x", "shell"),
    ("%%bash\nsqlite3 gradebook.db .dump", "shell"),
    ("%system ls", "shell"),
    ("%sx ls", "shell"),
    ("%time !ls", "shell"),
    ("rm -rf ~ + 1", "shell"),             # valid Python, but IPython's automagic runs %rm
    ("cat", "shell"),
    ("%time ls", "shell"),
    ("env", "magic"),
    ("%%timeit __import__('os')\npass", "dynamic-code"),
    ("%run other.py", "magic"),
    ("%env RAY_ADDRESS=", "magic"),
    ("%pip install requests", "magic"),
    ("%load_ext autoreload", "magic"),
    ("%cd /", "magic"),
    ("%%writefile course/bench.py\nprint(1)", "magic"),
    ("%%javascript\nalert(1)", "magic"),
    ("x = 1\n%%time\ny = 2", "magic"),
    ("%matplotlib inline; import os", "magic"),
    # the grader's files
    ("open('/srv/course/gradebook.db', 'rb')", "grader-file"),
    ("open('autograder/targets.py', 'w')", "grader-file"),
    # code nested in magics and kit helpers is checked too
    ("%%time\nimport ctypes", "import-not-allowed"),
    ("%%capture out\ntime.sleep = fake", "module-attribute-assignment"),
    ("%%timeit -n1\nos.system('ls')", "forbidden-name"),
    ("%timeit -n1 -r1 os.kill(1, 9)", "forbidden-name"),
    ("faults.cold_start('import os; os.system(\"ls\")')", "forbidden-name"),
    ("ray.get(actors[0].__ray_call__.remote(lambda self: self._key))", "forbidden-name"),
    # cells that do not parse
    ("def f(:\n    pass", "syntax-error"),
    ("x = " + "1 + " * 10_000 + "1", "syntax-error"),          # too deep to parse: never a crash
    ("time.sleep" + ".a" * 1_000 + " = 1", "syntax-error"),
]


@pytest.mark.parametrize("source, rule", HOSTILE, ids=[s.splitlines()[0][:40] for s, _ in HOSTILE])
def test_hostile_code_is_flagged(source, rule):
    found = check_source(source, bindings=SETUP)
    assert rule in {f.rule for f in found}, [str(f) for f in found]
    assert all(f.rule in RULES for f in found)


def test_hostile_table_is_broad():
    assert len(HOSTILE) >= 30
    assert {rule for _, rule in HOSTILE} == set(RULES)


# -- honest learner code: no finding ---------------------------------------------------------

HONEST = [
    "class Counter:\n    def __init__(self):\n        self.count = 0\n\n    def incr(self):\n"
    "        self.count += 1\n        return self.count",
    "obj.attr = 3\nobj.inner.value = [1, 2]\nrows[cls.__name__] = (1, 2)",
    "refs = [f.remote(i) for i in range(4)]\ndone, pending = ray.wait(refs, num_returns=1)\n"
    "print(ray.get(done))",
    "x = np.asarray([1, 2, 3], dtype=np.float32)\nplt.xlabel('x')\nplt.ylabel('y')\nplt.show()",
    "name = getattr(obj, 'name', None)\nhas = hasattr(obj, 'run')",
    "def med(ts, key):\n    return float(np.median([getattr(t, key) for t in ts]))",  # lab 04's solution
    "from dataclasses import dataclass, field\n\n@dataclass(frozen=True)\nclass P:\n    x: float\n"
    "    ys: list = field(default_factory=list)\n\n    def __post_init__(self):\n"
    "        object.__setattr__(self, 'x', float(self.x))",
    "def make(k):\n    def add(v):\n        return v + k\n    return add\ninc = make(1)\nsq = lambda v: v * v",
    "@ray.remote(num_cpus=0)\nclass Worker:\n    def run(self, x):\n        return x\n\n"
    "w = Worker.options(max_restarts=-1).remote()\nray.get(w.run.remote(1))",
    "from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy\n"
    "s = NodeAffinitySchedulingStrategy(node, soft=False)",
    "from ray.util import placement_group\npg = placement_group([{'GPU': 1}] * 2, strategy='PACK')",
    "%matplotlib inline\nimport matplotlib.pyplot as plt",
    "%time r = throughput(lambda: None, 10)\n%timeit -n 3 -r 2 sum(range(10))",
    "%%timeit -n 3\nsorted(range(100))",
    "%%time\nt = throughput(fn, 10)\nprint(t)",
    "%%capture out\nprint('quiet')",
    "np.percentile?",
    "autograder.check()\nautograder.check('throughput-sync')",
    "from autograder import check\ncheck()",
    "plt.rcParams['figure.dpi'] = 120",
    "path = os.path.join(tempfile.mkdtemp(), 'state.json')\nwith open(path + '.tmp', 'w') as f:\n"
    "    json.dump({'n': 1}, f)\n    f.flush()\n    os.fsync(f.fileno())\n"
    "os.replace(path + '.tmp', path)\nprint(os.getpid(), os.path.exists(path))",
    "from concurrent.futures import ThreadPoolExecutor, as_completed\nimport threading\n"
    "lock = threading.Lock()\nwith ThreadPoolExecutor(max_workers=4) as pool:\n"
    "    futures = [pool.submit(ray.get, r) for r in refs]\n"
    "    out = [f.result() for f in as_completed(futures)]",
    "import sys\nprint(sys.getsizeof(batch), sys.version_info >= (3, 10))\nsys.stdout.flush()",
    "try:\n    ray.get(ref, timeout=1)\nexcept Exception as exc:\n"
    "    print(type(exc).__name__, exc.__class__.__name__)",
    "class Child(Base):\n    def __init__(self):\n        super().__init__()\n"
    "        self.label = self.__class__.__name__\n"
    "print(np.__version__, ray.__version__)",
    "import asyncio\nawait asyncio.sleep(0)",
    "print(np, time)\nxp = cupy if gpu else np\nif xp is np:\n    y = xp.zeros(3)",
    "import collections, functools, itertools, math, random, operator\nc = collections.Counter('abca')\n"
    "@functools.lru_cache(maxsize=None)\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
    "pairs = list(itertools.combinations(range(4), 2))\nrng = random.Random(0)\n"
    "best = max(d.items(), key=operator.itemgetter(1))",
    "from IPython.display import Markdown, display\ndisplay(Markdown('| a | b |\\n|---|---|'))",
    "from tqdm.auto import tqdm\nfor i in tqdm(range(3)):\n    time.sleep(0.01)",
    "import shutil\nshutil.rmtree(workdir, ignore_errors=True)",
    "import warnings\nwarnings.filterwarnings('ignore', category=DeprecationWarning)",
    "found = ray.experimental.get_object_locations(refs)\nnode = ray.get_runtime_context().get_node_id()",
    "from course import backend, bench, kernels\n"
    "m = bench.measure(lambda: kernels.process(batch), items=len(batch), budget_s=1.0)\n"
    "xp = backend.xp()\narr = xp.asarray(batch)",
    "perf = time.perf_counter\nstart = perf()\nelapsed = perf() - start",
    "cold = faults.cold_start('import ray, numpy; from course import kernels', repeats=2)",
    "print(f'{rate:,.0f} images/s; {x!r}')\ns = 'the __init__ method and the C3 claim'",
    "import cupy as cp\na = cp.arange(10)\ncp.cuda.Stream.null.synchronize()",
    "from scipy.optimize import curve_fit\npopt, _ = curve_fit(lambda n, a: n / (a * n + 1), xs, ys)",
    "import platform, pathlib\nprint(platform.processor(), pathlib.Path('results.json').exists())",
    "PipelineWorker = ray.remote(max_restarts=-1, max_task_retries=-1)(PipelineWorker)",
    "while (n := len(pending)) > 0:\n    done, pending = ray.wait(pending)",
    "import random\nrandom.seed(0)\nnp.random.seed(0)\nrng = np.random.default_rng(0)",
    "if isinstance(x, np.ndarray) and type(x) is not list:\n    print(dir(np)[:3], repr(time))",
    "ls = sorted(latencies)",                # assigning to a magic's name is Python
    "time",                                  # %time with nothing to time
    "plt.rcParams.update({'font.size': 9})\nos.remove(path)\nos.makedirs(d, exist_ok=True)",
    "quotas = dict(QUOTAS)\nquotas.update(a=4)\nrows = []\nrows.append(1)\nbatch.sort()",
    "import scipy.signal\nf, p = scipy.signal.welch(x)\nnow = datetime.datetime.now().time()",
    "from typing import Callable, Optional\n\n"
    "def run(fn: Callable[[], None], n: 'int' = 1) -> Optional[float]:\n"
    "    x: 'list[float]' = []\n    return None",
    "import traceback\ntry:\n    1 / 0\nexcept ZeroDivisionError:\n    traceback.print_exc()",
    "arr = np.load('batch.npy')\nnp.save('batch.npy', arr)",
]


@pytest.mark.parametrize("source", HONEST, ids=[s.splitlines()[0][:40] for s in HONEST])
def test_honest_code_is_not_flagged(source):
    assert [str(f) for f in check_source(source, bindings=SETUP)] == []


def test_honest_table_is_broad():
    assert len(HONEST) >= 20


# -- findings: where and what ------------------------------------------------------------------

def test_finding_names_cell_grade_id_and_line():
    found = check_source("x = 1\n\ntime.perf_counter = lambda: 0.0", cell=12, grade_id="throughput")
    assert found == [Finding(12, 3, "module-attribute-assignment",
                             "assigns to an attribute of the imported module 'time' (time.perf_counter = ...)",
                             "throughput")]
    assert str(found[0]) == ("cell 12 (throughput), line 3: assigns to an attribute of the imported "
                             "module 'time' (time.perf_counter = ...)")
    assert str(check_source("eval('1')", cell=4)[0]).startswith("cell 4, line 1: ")


@pytest.mark.parametrize("source, line", [
    ("%matplotlib inline\nx = 1\nimport ctypes", 3),                   # a magic keeps its line
    ("x = 1\n%time f(1,\\\n  2)\nimport ctypes", 4),                    # a continued magic joins lines
    ("\n\nimport ctypes", 3),                                           # leading blank lines are dropped
    ("%%time\nx = 1\n\nimport ctypes", 4),                              # a cell magic's body
    ("\n%%timeit -n1\nx = 1\nimport ctypes", 4),
    ("x = 1\n%time import ctypes", 2),                                  # a line magic's argument
    ("y = [\n  1,\n]\n!ls", 4),
    ("x = (\n", 1),                                                     # a syntax error's own line
    ("x = 1\ny = )\n", 2),
    ("faults.cold_start(\n    'import ctypes'\n)", 2),
])
def test_lines_are_the_learners_lines(source, line):
    found = check_source(source, bindings=SETUP)
    assert found and {f.line for f in found} == {line}, [str(f) for f in found]


def test_deep_code_is_checked_without_crashing():
    assert check_source("y = time" + ".a" * 1_000) == []
    assert {f.rule for f in check_source("x = " + "(" * 150 + "1" + ")" * 150)} <= {"syntax-error"}


def test_findings_are_sorted_and_not_repeated():
    found = check_source("import ctypes\neval('1')\neval('1')\nimport ctypes")
    assert [(f.line, f.rule) for f in found] == [(1, "import-not-allowed"), (2, "dynamic-code"),
                                                 (3, "dynamic-code"), (4, "import-not-allowed")]


# -- notebooks: which cells count, and what earlier cells bound ----------------------------

def notebook(tmp_path: Path, cells: list[tuple[str, dict | None]]) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("# a lab: eval(x) in prose is not code"))
    for source, meta in cells:
        cell = nbformat.v4.new_code_cell(source)
        if meta is not None:
            cell.metadata["nbgrader"] = {"schema_version": 3, "task": False, "grade": False,
                                         "locked": False, "solution": False, **meta}
        nb.cells.append(cell)
    path = tmp_path / "lab.ipynb"
    nbformat.write(nb, str(path))
    return path


SETUP_CELL = ("import autograder\nautograder.begin('00_measure')\nimport time as clock\nimport numpy as np",
              {"grade_id": "setup", "locked": True})


def test_only_learner_cells_are_checked_but_every_cell_binds(tmp_path):
    path = notebook(tmp_path, [
        SETUP_CELL,
        ("def throughput(fn, items):\n    clock.perf_counter = lambda: 0.0",
         {"grade_id": "throughput", "solution": True}),
        ("autograder.grade('throughput-sync')",
         {"grade_id": "test-throughput", "grade": True, "locked": True, "points": 2}),
        ("alias = np\n", None),                  # a cell the learner added
        ("alias.asarray = list", None),
    ])
    assert [(f.cell, f.grade_id, f.line, f.rule) for f in check_notebook(path)] == [
        (2, "throughput", 2, "module-attribute-assignment"),
        (5, None, 1, "module-attribute-assignment"),
    ]


def test_a_learner_cannot_hide_a_cell_behind_locked_metadata(tmp_path):
    """Without the instructor's notebook the metadata decides; with it, only the cells
    nbgrader restores from it are skipped (nbgrader drops a grade_id it does not know and
    restores only cells locked in its own copy)."""
    source = notebook(tmp_path, [SETUP_CELL, ("def f():\n    pass", {"grade_id": "f", "solution": True})])
    (tmp_path / "sub").mkdir()
    submitted = notebook(tmp_path / "sub", [
        SETUP_CELL,
        ("import ctypes", {"grade_id": "f", "locked": True}),        # the solution cell, relabelled
        ("import subprocess", {"grade_id": "made-up", "locked": True}),
    ])
    assert check_notebook(submitted) == []
    found = check_notebook(submitted, source=source)
    assert [(f.cell, f.grade_id, f.rule) for f in found] == [(2, "f", "import-not-allowed"),
                                                             (3, "made-up", "import-not-allowed")]


def test_a_markdown_cell_labelled_as_a_solution_cell_is_checked_as_code(tmp_path):
    """nbgrader gives a cell with a known grade_id the instructor's cell type: a markdown cell
    carrying a solution cell's grade_id runs as code."""
    source = notebook(tmp_path, [SETUP_CELL, ("def f():\n    pass", {"grade_id": "f", "solution": True})])
    nb = nbformat.read(source, as_version=4)
    nb.cells[2] = nbformat.v4.new_markdown_cell("import ctypes", metadata={"nbgrader": {
        "grade_id": "f", "solution": True, "grade": False, "locked": False, "schema_version": 3}})
    nb.cells.append(nbformat.v4.new_code_cell("print('after')"))
    (tmp_path / "sub").mkdir()
    nbformat.write(nb, str(tmp_path / "sub" / "lab.ipynb"))
    found = check_notebook(tmp_path / "sub" / "lab.ipynb", source=source)
    assert [(f.cell, f.grade_id, f.rule) for f in found] == [(2, "f", "import-not-allowed")]


def test_a_copy_of_a_locked_cell_is_not_restored(tmp_path):
    """nbgrader keeps a repeated grade_id on the last cell only: an edited first copy of the
    locked setup cell runs as the learner wrote it."""
    source = notebook(tmp_path, [SETUP_CELL])
    (tmp_path / "sub").mkdir()
    submitted = notebook(tmp_path / "sub", [("import ctypes", SETUP_CELL[1]), SETUP_CELL])
    for instructor in (None, source):
        found = check_notebook(submitted, source=instructor)
        assert [(f.cell, f.rule) for f in found] == [(1, "import-not-allowed")]


def test_a_cell_with_nbgrader_metadata_but_no_role_is_the_learners(tmp_path):
    path = notebook(tmp_path, [SETUP_CELL, ("eval('1')", {"grade_id": "plain"})])
    assert [f.rule for f in check_notebook(path)] == ["dynamic-code"]


def test_the_setup_cells_names_reach_learner_cells(tmp_path):
    path = notebook(tmp_path, [
        ("import autograder\nimport numpy as np\nimport os", {"grade_id": "setup", "locked": True}),
        ("np.ctypeslib.as_array(p)\nos.system('ls')", None),
    ])
    assert [(f.line, f.rule) for f in check_notebook(path)] == [(1, "forbidden-name"), (2, "forbidden-name")]


# -- the allowlist -------------------------------------------------------------------------------

def test_allowlist_is_read_only_and_documented():
    with pytest.raises(TypeError):
        ALLOWED_IMPORTS["subprocess"] = None
    for module in ("numpy", "ray", "course", "matplotlib", "tqdm", "time", "statistics", "json", "os.path"):
        assert ALLOWED_IMPORTS[module] is None, module
    assert ALLOWED_IMPORTS["autograder"] == {"check"}
    assert {"getpid", "path", "replace"} <= ALLOWED_IMPORTS["os"]
    assert not {"system", "kill", "environ", "_exit"} & ALLOWED_IMPORTS["os"]
    for refused in ("subprocess", "ctypes", "gc", "inspect", "sqlite3", "importlib", "builtins", "signal"):
        assert refused not in ALLOWED_IMPORTS

def test_every_rule_is_documented():
    """The documentation's rules page (generated from RULES by ``python -m autograder.docs``, kept
    current by tests/test_docs.py) names every rule id."""
    text = (ROOT / "docs" / "static-check" / "rules.md").read_text()
    assert [rule for rule in RULES if f"`{rule}`" not in text] == []
