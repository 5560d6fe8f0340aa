"""Hostile lab 05 submissions (same shape as :mod:`attacks_lab00`), graded as a cohort by
``tests/test_attacks.py``: none may score a point its honest part did not earn.

Lab 05 is graded behind the trust boundary (``autograder/labs/lab05/checks.py``): ``plan`` is asked
about the grader's own seeded scenarios and compared with the grader's model; the kit runs
``build_pipeline`` in the kernel on fresh seeds, the values are compared with the grader's own
computation, the pool actors (``MapWorker(...)``) of the learner's job are read from Ray's
actor table by the reference process, and the pipeline is timed against the reference's,
interleaved -- which shares the lab's Ray cluster with the learner's kernel.

Besides ``honest`` and ``why``, an entry may carry ``may_lose`` (checks its honest part may or
may not earn, as measured) and ``open_issue`` (a hole the grader still has: the test is a strict
xfail until it is closed). Values computed in the kernel from the seed are right values:
``pipeline-correct`` may pass for them; the pool check is what must tell them from a pipeline.

Not in the graded corpus (too slow and too noisy for CI, measured by hand): the reference's
pipeline shares the lab's Ray, and a kernel thread that reserves every logical GPU with
placement groups for a few seconds after each of the learner's runs makes the reference's next
pool wait (public Ray API, no static finding). A pipeline 3.5 s slower per run scored 0.68x with
it once -- and 15/15 without it once, so the 2-core tier noise hid the effect.

Known limit, not graded here (as lab 01's): the grader reads the pool's *structure* from Ray's
records -- actors of the learner's job that Ray Data started and that processed batches -- not
what they computed. A real Ray Data pool of identity replicas over values computed in the kernel
passes ``pipeline-actor-pool``; the work still runs, in the kernel, and is timed.

Known hole, not graded here (issue 11, as lab 00): the kit ships its reference solutions, so
``from autograder.labs.lab05 import reference`` (or ``autograder.labs.lab05.checks.namespace(LAB)``) in a
blank lab hands ``plan`` the grader's own model until learners get the student bundle.
"""

from __future__ import annotations

from notebooks import answer_cells, released, solution

LAB = "05_capstone"
SEED = 20251204
PLAN = {"plan-limit", "plan-size", "plan-batch"}
THROUGHPUT = {"pipeline-throughput-tier1", "pipeline-throughput-tier2"}
ALL = PLAN | {"pipeline-correct", "pipeline-actor-pool"} | THROUGHPUT

# the solution's code cells by grade_id (to put a correct part back into a blank lab)
SOLUTION = answer_cells(solution(LAB))

ATTACKS: dict[str, dict] = {}

# 1. Tampering in the kernel: the kit's steps, the stages' truth and the clocks patched, and a
#    plan that looks for the grader's answers in memory --------------------------------------

ATTACKS["l05-tamper-in-kernel"] = dict(
    base=released(LAB), demos=False,
    after={"setup": ['''
import time as _time
from autograder.kernel import routines
from autograder.labs.lab05 import steps as _lab05

_truth = pipeline.expected
_tick = [0.0]
_time.perf_counter = _time.monotonic = lambda: _tick.__setitem__(0, _tick[0] + 1e-4) or _tick[0]  # a slow clock
pipeline.expected = lambda seed, n: np.zeros(int(n), dtype=np.float32)  # the kernel's copy of the grader's truth
pipeline.Model.__init__ = lambda self: setattr(self, "loaded", True)    # no model load, here at least
# the kit's step runs no pipeline: the seed's values, computed here; the actor table read says "a pool"
routines.STEPS["pipeline_values"] = lambda build, seed, n, batch_size, actors: _truth(int(seed), int(n))
routines.STEPS["map_workers"] = lambda driver_pid: []
_lab05.pipeline_values = routines.STEPS["pipeline_values"]
_lab05.map_workers = lambda driver_pid: []
''']},
    replace={
        "plan": '''
import gc
import sys


def _grader_answer(target):
    """The grader's own plan for this target, if any object in reach holds it: a dict or an
    object (Planned) in the heap, or a frame above this call."""
    keys = {"gpus", "actors_per_gpu", "batch_size", "cpu_workers", "limit"}
    frame = sys._getframe(1)
    while frame is not None:
        for value in frame.f_locals.values():
            if isinstance(value, dict) and keys <= set(value) and value is not frame.f_locals.get("mine"):
                return value
        frame = frame.f_back
    for obj in gc.get_objects():
        theirs = getattr(obj, "theirs", None) if type(obj).__name__ == "Planned" else None
        if isinstance(theirs, dict) and getattr(obj, "target", None) == target:
            return theirs
    return None


def plan(target, image_px, measured):
    """Whatever the grader's objects say; else a guess."""
    found = _grader_answer(target)
    return dict(found) if found else {"gpus": 8, "actors_per_gpu": 1, "batch_size": 64, "cpu_workers": 1,
                                      "limit": "gpu"}
''',
    },
    honest=set(),
    may_lose={"pipeline-correct"},
    why="the kit's pipeline_values and map_workers steps, lab05's copies, pipeline.expected, Model's load and "
        "the kernel's clocks patched in the kernel (the step returns the seed's values computed there, no "
        "pipeline runs); plan looks for the grader's answer in the frames above it and in the heap",
)

# 2. A plan that reads no number (it answers by call order), and decoy actors named like Ray
#    Data's pool: rows computed in the kernel (both closed after this corpus found them) --------

ATTACKS["l05-call-order-and-decoy-pool"] = dict(
    extended=True,  # CI: l05-tamper-in-kernel
    base=released(LAB), demos=False,
    replace={
        "plan": '''
_asked = []


def plan(target, image_px, measured):
    """Reads none of its inputs: the grader's scenarios come one per limit, in the order its
    source lists them (gpu, overhead, cpu, network), so the n-th call names the n-th limit."""
    _asked.append(target)
    limit = ("gpu", "overhead", "cpu", "network")[(len(_asked) - 1) % 4]
    return {"gpus": 8, "actors_per_gpu": 1, "batch_size": 64, "cpu_workers": 1, "limit": limit}
''',
        "build_pipeline": '''
# Ray Data names its pool actors' class "MapWorker(<op>)"; any class can have that name
Decoy = ray.remote(num_cpus=0, num_gpus=0)(type("MapWorker(MapBatches(Model))", (), {"ready": lambda self: True}))


class Rows:
    """All that pipeline.values asks of a dataset: iter_batches."""

    def __init__(self, ids, values):
        self.ids, self.values = ids, values

    def iter_batches(self, **kwargs):
        yield {"id": self.ids, "value": self.values}


def build_pipeline(seed, n, batch_size, actors):
    """The model never runs in a pool: the values come from the seed, here in the kernel; every
    run skips Ray Data and starts `actors` idle decoys named like Ray Data's pool actors."""
    values = pipeline.expected(seed, n)
    decoys = [Decoy.remote() for _ in range(actors)]
    ray.get([d.ready.remote() for d in decoys])
    for d in decoys:
        ray.kill(d)
    return Rows(np.arange(n), values)
''',
    },
    honest=set(),
    may_lose={"pipeline-correct"},
    static_flag=False,
    why="plan answers the n-th call with the n-th of the grader's limits in its source order, without "
        "reading a number (the grader now draws the order); build_pipeline computes the values in the kernel "
        "(pipeline.expected), returns an object with iter_batches and starts `actors` idle actors of a class "
        "named 'MapWorker(MapBatches(Model))' (Ray's task records show they processed no batch)",
)
