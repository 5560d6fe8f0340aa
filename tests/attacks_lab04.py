"""Hostile lab 04 submissions (same shape as :mod:`attacks_lab00`), graded as a cohort by
``tests/test_attacks.py``: none may score a point its honest part did not earn.

Lab 04 is graded behind the trust boundary (``autograder/labs/lab04/checks.py``): the grader owns
the emulated cluster and the shards (fresh, seeded, handed out without seeds); locality and
bytes moved come from Ray's object directory and object-store counters read around each run,
results are matched by content digest, and a resident worker's reads are counted by the
grader's actor serving the host batch -- never by counters in the kernel.

Besides ``honest`` and ``why``, an entry may carry ``may_lose``: checks its honest part may or
may not earn, because what the grader measures decides (a job that moves bytes may or may not
run slower than the reference on a given machine). Its score must lie between the honest
points and the honest plus ``may_lose`` points, and no other check may pass. Several
independent attacks share a submission where they hit different checks (each costs about a
minute of CI); a misplaced job is here as plain wrong work.
"""

from __future__ import annotations

from notebooks import answer_cells, released, solution

LAB = "04_data_affinity"
SEED = 20251203
ALL = {"shard-nodes", "pinned-correct", "pinned-locality-tier1", "pinned-locality-tier2", "pinned-bytes",
       "pinned-throughput-tier1", "pinned-throughput-tier2", "resident-copies", "link-bytes"}
LOCALITY = {"pinned-locality-tier1", "pinned-locality-tier2", "pinned-bytes"}
THROUGHPUT = {"pinned-throughput-tier1", "pinned-throughput-tier2"}

# the solution's code cells by grade_id (to put a correct part back into a blank lab)
SOLUTION = answer_cells(solution(LAB))

ATTACKS: dict[str, dict] = {}

# Ray shut down before every graded cell (learners "clean up") must cost nothing (issue 15): the
# tampering submission below does that too. (A misplaced but honest job losing exactly the
# locality points is tests/test_checks_lab04.py's.)

_SHUTDOWN = "import ray\nray.shutdown()  # 'cleaning up' before the next check\n"
_GRADED = ("shard_nodes", "test-shard-nodes", "naive_job", "task_job", "pinned_job", "test-pinned-correct",
           "test-pinned-locality-tier1", "test-pinned-locality-tier2", "test-pinned-bytes",
           "test-pinned-throughput-tier1", "test-pinned-throughput-tier2", "resident_worker",
           "test-resident-copies", "link_bytes")

# 3. Forged evidence: locations guessed, results made in the kernel, copy counters rewritten ---

ATTACKS["l04-forged-results"] = dict(
    extended=True,  # CI: l04-tamper-with-grader-objects forges the same stamps' source
    base=released(LAB), demos=False,
    replace={
        "shard_nodes": '''
import gc

def shard_nodes(refs):
    """Never asks Ray: the node a Shard in memory says it was made on, else the notebook's round-robin."""
    made_on = {}
    for obj in gc.get_objects():
        if type(obj).__name__ == "Shard" and getattr(obj, "ref", None) is not None:
            made_on[obj.ref] = getattr(obj, "node", None)
    return [{made_on.get(r) or NODES[i % len(NODES)]} for i, r in enumerate(refs)]
''',
        "pinned_job": '''
class PinnedJob:
    """Never touches a shard's bytes: rebuilds them from what the Shard carries, stamps the result itself."""

    def __init__(self, nodes):
        self.nodes = list(nodes)

    def run(self, shards):
        out = []
        for sh in shards:
            seed = getattr(sh, "seed", None)
            images = kernels.make_batch(getattr(sh, "images", None) or locality.SHARD_IMAGES,
                                        seed=0 if seed is None else seed, device=False)
            means = np.asarray(backend.to_host(kernels.process(images)))
            out.append(locality.Processed(node=getattr(sh, "node", None) or self.nodes[0],
                                          digest=locality.digest(images), means=means))
        return out
''',
        "resident_worker": '''
class ResidentWorker:
    """Copies on every call, and makes this process's copy counter say: once."""

    def __init__(self, batch):
        self.host = batch
        locality.to_device(batch)
        once = locality.copied_bytes()
        locality.copied_bytes = lambda: once

    def run(self):
        counter = getattr(locality, "_copied", None)
        kept = dict(counter) if isinstance(counter, dict) else None
        out = kernels.process(locality.to_device(self.host))
        if kept is not None:
            counter.update(kept)  # the copy never happened, as far as the kernel's count goes
        return out
''',
        "link_bytes": SOLUTION["link_bytes"],
    },
    honest={"link-bytes"},
    why="shard_nodes guessed from in-memory Shards, a PinnedJob that rebuilds each shard from its Shard's "
        "fields and forges locality.Processed stamps without reading a byte (so no copy ever appears: "
        "locality, bytes and throughput must need correct results), a ResidentWorker that copies every "
        "call and rewrites the kernel's copy counters; only link_bytes is honest (the solution's)",
)

# 4. Skipping the checks and replacing the grader, in one blank submission ---------------------

ATTACKS["l04-noop-and-skip"] = dict(
    extended=True,  # CI: lab 00's skip-other-ways
    base=released(LAB), demos=False,
    after={"setup": ['''
import autograder
from autograder import checks
from autograder.kernel import agent
from autograder.grader.session import session
from autograder.labs.lab04 import checks as lab04

def _skip_graded(lines):  # every hidden test cell starts "# Graded (N points)": run `pass` instead
    return ["pass\\n"] if any(line.startswith("# Graded (") for line in lines) else lines

_noop = lambda *a, **k: None  # noqa: E731
for _name in dir(lab04):
    if callable(getattr(lab04, _name)) and not _name.startswith("__"):
        setattr(lab04, _name, _noop)
for _check in checks.REGISTRY[lab04.LAB].values():
    object.__setattr__(_check, "fn", _noop)
autograder.grade = agent.grade = autograder.check = _noop
session.Session.run = lambda self, name: None
get_ipython().input_transformers_cleanup.append(_skip_graded)
''']},
    honest=set(),
    why="hidden cells rewritten to `pass` by an input transformer, and every lab04 function, registered "
        "check, grade() and Session.run replaced by no-ops",
)

# 5. Tampering with the grader's objects from learner code -------------------------------------

ATTACKS["l04-tamper-with-grader-objects"] = dict(
    extended=True,  # CI: lab 04's closed store in tests/test_checks_lab04.py; l01-forged-driver
    demos=False,
    after={gid: [_SHUTDOWN] for gid in _GRADED},
    replace={
        "pinned_job": '''
import gc


def _zero_counters(self):  # runs inside an actor, when Ray lets us in
    for name, value in list(vars(self).items()):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            setattr(self, name, type(value)())
    return sorted(vars(self))


def _enter_every_actor():
    """Ray's __ray_call__ runs any function inside an actor: every actor handle in reach gets one."""
    try:
        handles = [o for o in gc.get_objects() if isinstance(o, ray.actor.ActorHandle)]
    except Exception:
        return
    calls = []
    for handle in handles:
        try:
            calls.append(handle.__ray_call__.remote(_zero_counters))
        except Exception:
            pass
    if calls:
        ray.wait(calls, num_returns=len(calls), timeout=2)


class PinnedJob:
    """One pinned actor per node, as asked -- but every shard is processed on the driver's node,
    and then freed so that Ray's directory has no copies left to count."""

    def __init__(self, nodes):
        self.workers = {n: Worker.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote()
                        for n in nodes}

    def run(self, shards):
        _enter_every_actor()
        home = self.workers.get(locality.here()) or next(iter(self.workers.values()))
        results = ray.get([home.run.remote(sh.ref) for sh in shards])
        try:
            ray._private.internal_api.free([sh.ref for sh in shards])
        except Exception:
            pass
        return results
''',
        "resident_worker": '''
def _uncounted_bytes(batch):
    """The host batch's pixels without a counted read: a private array, an ObjectRef it keeps, or
    the serving actor's arrays read with __ray_call__; None when none of it works."""
    try:
        fields = dict(vars(batch))
    except TypeError:
        fields = {}
    for name in getattr(type(batch), "__slots__", ()):
        try:
            fields[name] = getattr(batch, name)
        except AttributeError:
            pass
    for value in fields.values():
        try:
            if isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 3:
                return value
            if isinstance(value, ray.ObjectRef):
                got = ray.get(value, timeout=5)
                if isinstance(got, np.ndarray):
                    return got
            if isinstance(value, ray.actor.ActorHandle):
                arrays = ray.get(value.__ray_call__.remote(
                    lambda self: [v for v in vars(self).values() if isinstance(v, np.ndarray)]), timeout=5)
                if arrays:
                    return arrays[0]
        except Exception:
            pass
    return None


class ResidentWorker:
    """One counted copy in __init__, so it looks resident -- then a copy on every call, from bytes
    reached without being counted when that works, else from the batch itself."""

    def __init__(self, batch):
        self.batch = batch
        self.images = locality.to_device(batch)
        self.raw = _uncounted_bytes(batch)

    def run(self):
        return kernels.process(locality.to_device(self.raw if self.raw is not None else self.batch))
''',
    },
    honest={"shard-nodes", "pinned-correct", "link-bytes"},
    may_lose=set(THROUGHPUT),
    why="PinnedJob runs __ray_call__ on every actor handle the kernel holds, processes every shard on the "
        "driver's node and frees the grader's shards afterwards to hide the copies; ResidentWorker copies "
        "every call from the host batch's private attributes, a kept ObjectRef or the serving actor's "
        "arrays (read with __ray_call__), falling back to counted reads; and ray.shutdown() before every "
        "graded cell, which must cost nothing",
)

# 4. Spinning while the reference is timed ---------------------------------------------------------

SPINNING_JOB = '''
class PinnedJob:
    """Pinned as it should be, and correct -- then idles as long as its work took (half the
    reference's speed), and keeps spinners for the reference's turns, below."""

    def __init__(self, nodes):
        self.workers = {n: Worker.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote()
                        for n in nodes}

    def run(self, shards):
        import pathlib, time
        busy, ended = pathlib.Path("/tmp/.mine-busy"), pathlib.Path("/tmp/.mine-ended")
        busy.touch()
        try:
            started = time.perf_counter()
            refs = []
            for sh, nodes in zip(shards, shard_nodes([sh.ref for sh in shards])):
                node = next((n for n in sorted(nodes) if n in self.workers), None)
                worker = self.workers[node] if node else next(iter(self.workers.values()))
                refs.append(worker.run.remote(sh.ref))
            out = ray.get(refs)
            time.sleep(time.perf_counter() - started)
            return out
        finally:
            ended.touch()
            busy.unlink(missing_ok=True)


# two spinning processes per core, busy whenever PinnedJob.run is not but ran in the last 10 s:
# the reference's turns (and its start, just after the learner's warm-up run)
import os as _os, sys as _sys, subprocess as _sp
_SPIN = """
import os, time
while True:
    try:
        spin = (not os.path.exists("/tmp/.mine-busy")
                and time.time() - os.stat("/tmp/.mine-ended").st_mtime < 10)
    except OSError:
        spin = False
    if spin:
        end = time.time() + 0.01
        while time.time() < end:
            pass
    else:
        time.sleep(0.002)
"""
_spinners = [_sp.Popen([_sys.executable, "-c", _SPIN]) for _ in range(2 * (_os.cpu_count() or 2))]
'''

ATTACKS["l04-spin-in-the-reference-turns"] = dict(
    extended=True,  # CI: the idle priority itself, tests/test_sandbox.py and tests/test_session.py
    demos=False, replace={"pinned_job": SPINNING_JOB},
    honest=ALL - THROUGHPUT,
    may_lose={"pinned-throughput-tier1"},  # half speed: about 0.45x, near the 0.4 tier
    why="a correct pinned job at half the reference's speed, with two processes per core that spin "
        "whenever the job is not running: while the reference's turn is timed (the learner side is at "
        "idle CPU priority then, not frozen: lab 04's spec)",
)
