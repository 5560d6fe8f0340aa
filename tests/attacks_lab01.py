"""Hostile lab 01 submissions: what a learner who has read the open-source autograder tries.

Same shape as :mod:`attacks_lab00` (``honest``: the checks the submission's own honest work
earns; ``why``: the attack in one line); graded as a cohort by ``tests/test_attacks.py``.
Built from the released blank lab or the solution, without the lesson's demo cells.

Known limit (not in the corpus): the grader counts, in Ray's own task records, the
``process()`` calls that finished in the learner actor's own process; it does not see what
they computed. A decoy actor that runs one trivial ``process()`` per grader batch while the
kernel computes the results would pass ``worker-correct`` -- by then the learner has written
most of an actor, and the throughput tiers still time the whole round trip.
"""

from __future__ import annotations

from notebooks import cell_source, released

LAB = "01_actor_scaling"
SEED = 20251130
WORKER = {"worker-correct", "worker-state", "worker-tier1", "worker-tier2"}
DRIVER = {"driver-correct", "driver-concurrency", "driver-tier1", "driver-tier2"}
MODEL = {"model-short-kernel", "model-long-kernel"}

ATTACKS: dict[str, dict] = {}

# 1 + 2. Skipping the checks and replacing the grader, in one blank submission ---------------

ATTACKS["l01-skip-and-noop"] = dict(
    extended=True,  # CI: lab 00's skip-other-ways and l04-tamper-with-grader-objects
    base=released(LAB), demos=False,
    after={"setup": ['''
import autograder
from autograder import checks
from autograder.kernel import agent
from autograder.grader.session import session
from autograder.labs.lab01 import checks as lab01

def _skip_graded(lines):  # every hidden test cell starts "# Graded (N points)": run `pass` instead
    return ["pass\\n"] if any(line.startswith("# Graded (") for line in lines[:1]) else lines

_noop = lambda *a, **k: None  # noqa: E731
autograder.grade = agent.grade = autograder.check = _noop
session.Session.run = lambda self, name: None
for _check in checks.REGISTRY[lab01.LAB].values():
    object.__setattr__(_check, "fn", _noop)
    if hasattr(lab01, _check.fn.__name__):
        setattr(lab01, _check.fn.__name__, _noop)
get_ipython().input_transformers_cleanup.append(_skip_graded)
''']},
    honest=set(),
    why="hidden cells rewritten to `pass`, and every check, grade() and Session.run replaced by no-ops",
)

# 3. Slowing the reference it is compared with (the original lab 01 attack) ----------

SLOW_WORKER = '''
class ImageWorker:
    """Correct, counts its images, but pays 25 ms of one-off work on every call."""

    def __init__(self):
        self.images = 0

    def process(self, batch):
        import time
        time.sleep(0.025)
        self.images += len(batch)
        return backend.to_host(kernels.process(backend.to_device(batch)))

    def images_processed(self):
        return self.images


import time as _time
from autograder.kernel import routines
from autograder.labs.lab01 import reference as _reference
from course import bench as _bench, kernels as _kernels

_slow = _reference.ImageWorker.process
_reference.ImageWorker.process = lambda self, batch: (_time.sleep(0.1), _slow(self, batch))[1]
_reference.run_pool = lambda actors, batches, depth=2: (_time.sleep(1.0), [ray.get(a.process.remote(b)) for a, b in zip(actors * len(batches), batches)])[1]
_bench.compare = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("no comparisons"))
_reference_steps = dict(routines.STEPS)  # the kit's steps in this kernel: make the reference's slow too
routines.STEPS["process_all"] = lambda workers, refs: (
    _time.sleep(0.5) if type(workers[0]).__name__ != "ImageWorker" else None,
    _reference_steps["process_all"](workers, refs))[1]
'''

ATTACKS["l01-slow-the-reference"] = dict(
    extended=True,  # CI: l01-forged-driver; the reference is in a Ray of its own (test_calibrate)
    demos=False, replace={"image_worker": SLOW_WORKER},
    honest=(WORKER | DRIVER | MODEL) - {"worker-tier1", "worker-tier2"},
    why="a correct but slow actor, with the reference implementations and the kit's steps in the "
        "kernel slowed down and the comparison function replaced",
)

# 3b. Taking the cores from the reference while its turn is timed (no patching at all) -------

SPINNING_WORKER = '''
class ImageWorker:
    """Correct, counts its images, but sleeps 5 ms per call (about half the reference's speed),
    and marks when it last ran, for the spinners below."""

    def __init__(self):
        self.images = 0

    def process(self, batch):
        import pathlib, time
        pathlib.Path("/tmp/.mine").touch()
        time.sleep(0.005)
        self.images += len(batch)
        out = backend.to_host(kernels.process(backend.to_device(batch)))
        pathlib.Path("/tmp/.mine").touch()
        return out

    def images_processed(self):
        return self.images


# two spinning processes per core, busy only while no call of this actor ran in the last 30 ms:
# the reference's turns (each side's actor is timed in turn, interleaved)
import os as _os, sys as _sys, subprocess as _sp
_SPIN = """
import os, time
while True:
    try:
        idle = time.time() - os.stat("/tmp/.mine").st_mtime > 0.03
    except OSError:
        idle = False
    end = time.time() + (0.01 if idle else 0.0)
    while time.time() < end:
        pass
    if not idle:
        time.sleep(0.002)
"""
_spinners = [_sp.Popen([_sys.executable, "-c", _SPIN]) for _ in range(2 * (_os.cpu_count() or 2))]
'''

ATTACKS["l01-spin-in-the-reference-turns"] = dict(
    extended=True,  # CI: the freeze itself, tests/test_sandbox.py and tests/test_session.py
    demos=False, replace={"image_worker": SPINNING_WORKER},
    # the spinners also spin while the learner's own driver and model are timed
    may_lose={"driver-concurrency", "driver-tier1", "driver-tier2", "model-short-kernel", "model-long-kernel"},
    honest=(WORKER | DRIVER | MODEL) - {"worker-tier1", "worker-tier2", "driver-concurrency", "driver-tier1",
                                        "driver-tier2", "model-short-kernel", "model-long-kernel"},
    why="a correct actor at about half the reference's speed, with two processes per core that spin "
        "whenever the actor has not run for 30 ms: while the reference's turn is timed",
)

# 4. Forged evidence: jobs shortened, receipts forged, the grader's GPUs re-armed ------------

FORGING_DRIVER = '''
import dataclasses

def run_pool(actors, batches, depth=2):
    """Tries every shortcut around the grader's emulated GPUs, then echoes the tokens."""
    try:  # Ray's __ray_call__ runs any function inside an actor: read the key, forge the receipts
        from autograder.labs.lab01.instruments import receipt
        key = bytes.fromhex(ray.get(actors[0].__ray_call__.remote(lambda self: self._key.hex())))
        return [receipt(key, b.token) for b in batches]
    except Exception:
        pass
    try:
        ray.get([a.arm.remote("00" * 32) for a in actors])  # re-arm with a key of my own
    except Exception:
        pass
    try:
        return ray.get([actors[i % len(actors)].process.remote(dataclasses.replace(b, seconds=0.0))
                        for i, b in enumerate(batches)])  # zero-length kernels
    except Exception:
        pass
    return [b.token for b in batches]  # what a lesson's emulated GPU returns
'''

ATTACKS["l01-forged-driver"] = dict(
    demos=False, replace={"run_pool": FORGING_DRIVER},
    honest=set(WORKER),
    why="run_pool steals the GPUs' key with __ray_call__, re-arms them, shortens the jobs' kernels, "
        "then returns the tokens it was given",
)

# 6. Results computed in the kernel instead of by the actor ----------------------------------

ATTACKS["l01-results-without-actor"] = dict(
    extended=True,  # CI: l01-forged-driver; both read Ray's task records
    base=released(LAB), demos=False,
    after={"setup": ['''
from autograder.kernel import routines
from course import kernels as _k

class _Nothing:
    def images_processed(self):
        return None

_sent = {}
routines.STEPS["actors"] = lambda cls, n: [_Nothing() for _ in range(int(n))]
routines.STEPS["batches"] = lambda specs: [_k.make_batch(int(n), seed=int(s), device=False) for s, n in specs]
routines.STEPS["process_all"] = lambda workers, refs: [
    (_sent.__setitem__("n", _sent.get("n", 0) + len(b)), _k.process(b))[1] for b in refs]
routines.STEPS["method"] = lambda workers, name: [_sent.get("n", 0)]
routines.STEPS["release"] = lambda workers: None

# ... and when the grader asks which actor did it, names a real actor that never ran a batch
import ray as _ray
from course import fleet as _fleet

@_ray.remote(num_cpus=0)
class _Decoy:
    def process(self, batch):
        return None

def _decoy_id(workers):
    global _decoy
    _fleet.start()
    _decoy = _Decoy.remote()
    _ray.get(_decoy.__ray_ready__.remote())
    return _decoy._actor_id.hex()

routines.STEPS["actor_id"] = _decoy_id
''']},
    honest=set(),
    why="the kit's steps in the kernel replaced: results computed in the kernel, no actor at all; "
        "Ray's task records (read by the grader's reference process) show no process() call in an actor",
)

# 7. Not an attack: Ray shut down before every graded cell (learners "clean up") ---------------

_SHUTDOWN = "import ray\nray.shutdown()  # 'cleaning up' before the next check\n"
ATTACKS["l01-shutdown-before-every-check"] = dict(
    demos=False,
    after={gid: [_SHUTDOWN] for gid in ("image_worker", "test-worker-correct", "test-worker-state",
                                         "test-worker-tier1", "test-worker-tier2", "run_pool",
                                         "test-driver-correct", "test-driver-concurrency", "test-driver-tier1",
                                         "test-driver-tier2", "model", "test-model-short-kernel")},
    honest=WORKER | DRIVER | MODEL,
    why="not an attack: ray.shutdown() before every graded cell must cost nothing (issue 15)",
    extended=True,  # CI: l02-shutdown-before-every-check covers rejoining a Ray lab's Ray
)

# 8. Not an attack: an actor method that never returns, called by the lesson's own cells ------

_PROCESS = "    def process(self, batch):\n"
_TRY_IT = ("worker = ray.remote(ImageWorker).remote()  # trying it out, as the lesson's cells do\n"
           "ray.get(worker.process.remote(kernels.make_batch(4, device=False)))\n")
ATTACKS["l01-hanging-actor"] = dict(
    extended=True,  # the actor call deadline is tested in the extended set only; CI has lab 00's hanging cell
    base=released(LAB), demos=False,  # the rest blank: the hang is what is timed
    replace={"image_worker": cell_source(LAB, "image_worker").replace(
        _PROCESS, _PROCESS + "        while True:  # a bug: it never returns\n            pass\n", 1)},
    after={"image_worker": [_TRY_IT, _TRY_IT]},
    honest=set(),
    why="not an attack: ImageWorker.process never returns; the first cell that calls it (in the actor's "
        "process) is stopped at the call deadline, every later call fails at once, and the worker checks fail "
        "with the reason (issue 15: a hang costs about one deadline, not one cell limit per cell)",
)
