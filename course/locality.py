"""Where data lives, where work runs, and the bytes in between (lab 04).

The setting: an **emulated** multi-node Ray cluster (:func:`start`, several raylets and
object stores on one machine, so object transfers and locality are real; the "network" is
localhost), and a sharded image dataset whose shards are produced on chosen nodes
(:func:`make_shards`, soft node affinity so a lost shard can be rebuilt elsewhere).

Every unit of work runs :func:`process` (inside a learner's task or actor): the course's
image kernel, stamped with the node it ran on and a digest of the shard it read. A
:func:`trace` of a job then says, from Ray and the stamps -- never from the job's own
counters -- where each shard was processed, what fraction of the bytes were processed on a
node that already held them (*locality*), and how many bytes Ray copied between object stores
(new copies of each shard that appeared during the run, from
``ray.experimental.get_object_locations``).

While grading, the dataset and the host batch are the grader's own (a shard store, a host
batch that counts its reads: ``autograder/labs/lab04/instruments.py``); :func:`store_bytes` is
the object-store counter the grader reads around each run (``autograder/labs/lab04/checks.py``).

:func:`to_device` is device-level affinity's unit of cost: a host-to-device copy (CuPy), or
on a CPU machine a host-memory copy standing in for it (labelled so in the lab), counted per
process by :func:`copied_bytes`.
"""

from __future__ import annotations

import gc
import hashlib
import os
import random
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from . import backend, cluster, kernels

NODES = 4               # nodes of the emulated cluster (the head is one of them)
CPUS_PER_NODE = 4       # logical CPUs per node: room for a few jobs' actors and tasks side by side
OBJECT_STORE_MB = 128   # per node; small on purpose (2-core CI machines, Colab's /dev/shm)
SHARD_IMAGES = 1024     # images per shard: 4 MiB of uint8 pixels at 64 x 64
LOCATION_WAIT_S = 5.0   # at most, for the object directory to list a shard just made


def start(nodes: int = NODES) -> list[str]:
    """Connect to an emulated cluster of ``nodes`` nodes (starting one if needed); its node ids.

    Reuses the cluster this process already started when it still has ``nodes`` alive nodes.
    With ``RAY_ADDRESS`` set it joins that cluster instead (while grading, the grader's own
    emulated cluster; or a real one).
    """
    if os.environ.get("RAY_ADDRESS"):
        cluster.start()
        return node_ids()
    if not (ray.is_initialized() and cluster._emulated is not None and len(node_ids()) >= nodes):
        cluster.emulated(nodes, cpus_per_node=CPUS_PER_NODE, object_store_mb=OBJECT_STORE_MB)
    return node_ids()


def node_ids() -> list[str]:
    """Ids of the alive nodes, head node first (the order they joined)."""
    alive = [n for n in ray.nodes() if n.get("Alive")]
    head = [n for n in alive if n.get("Resources", {}).get("node0")]
    rest = sorted((n for n in alive if n not in head),
                  key=lambda n: min((k for k in n.get("Resources", {}) if k.startswith("node") and k[4:].isdigit()),
                                    default=n["NodeID"]))
    return [n["NodeID"] for n in head + rest]


def here() -> str:
    """The id of the node this code runs on (in a task, an actor or the driver)."""
    return ray.get_runtime_context().get_node_id()


# -- the dataset -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Shard:
    """One shard of the dataset: an object in some node's object store."""

    index: int
    ref: ray.ObjectRef
    node: str       # the node it was produced on (soft affinity: Ray may have chosen another)
    seed: int | None  # make_batch seed of its images (None: the grader's shards keep theirs to themselves)
    images: int

    @property
    def nbytes(self) -> int:
        return self.images * kernels.IMAGE_SIZE**2


@ray.remote(num_cpus=0)  # never waits behind the jobs' actors for a CPU
def _produce(images: int, seed: int):
    return kernels.make_batch(images, seed=seed, device=False)


def round_robin(nodes: Sequence[str], shards: int) -> list[str]:
    """Shard i on node i mod len(nodes): the notebook's placement."""
    return [nodes[i % len(nodes)] for i in range(shards)]


def scattered(nodes: Sequence[str], shards: int, seed: int) -> list[str]:
    """A seeded, uneven placement (every node gets at least one shard when there are enough)."""
    rng = random.Random(seed)
    place = list(nodes)[: min(len(nodes), shards)]
    place += [rng.choice(list(nodes)) for _ in range(shards - len(place))]
    rng.shuffle(place)
    return place


def make_shards(placement: Sequence[str], *, images: int = SHARD_IMAGES, seed: int = 0,
                timeout_s: float = 120.0) -> list[Shard]:
    """One shard per entry of ``placement`` (a node id), produced on that node; waits until made.

    Soft node affinity: a shard whose node is lost can be rebuilt elsewhere from lineage
    (a hard pin would make it unreconstructable).
    """
    return produce(placement, [seed * 100_003 + i for i in range(len(placement))], images, timeout_s)


def produce(placement: Sequence[str], seeds: Sequence[int], images: int, timeout_s: float = 120.0) -> list[Shard]:
    """Shard i made on ``placement[i]`` from ``seeds[i]`` (:func:`make_shards` draws the seeds)."""
    shards = []
    for i, (node, s) in enumerate(zip(placement, seeds, strict=True)):
        ref = _produce.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=True)).remote(images, s)
        shards.append(Shard(i, ref, node, s, images))
    refs = [sh.ref for sh in shards]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s, fetch_local=False)
    if len(ready) < len(refs):
        raise TimeoutError(f"only {len(ready)} of {len(refs)} shards were produced within {timeout_s:g} s")
    # Ray's object directory can list a fresh shard a moment after it is made: a trace that read
    # "before" in that moment counted the shard's own first copy as a move (a CI run: 4 shards
    # moved where 3 were). Wait, briefly, until every shard has its location.
    deadline = time.monotonic() + LOCATION_WAIT_S
    while not all(locations(refs)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return shards


def locations(refs: Sequence[ray.ObjectRef]) -> list[set[str]]:
    """The nodes holding a copy of each object, from Ray's object directory."""
    found = ray.experimental.get_object_locations(list(refs))
    return [set(found.get(r, {}).get("node_ids") or []) for r in refs]


def store_bytes() -> dict[str, int]:
    """Bytes each node's object store has created so far (Ray's raylet counters), by node id.

    Every object written to a store counts: a shard produced there, a copy fetched from
    another node, a large task result. The difference over a run is what the run wrote.
    """
    from ray._private import internal_api

    out = {}
    for n in ray.nodes():
        if n.get("Alive"):
            reply = internal_api.node_stats(n["NodeManagerAddress"], n["NodeManagerPort"], include_memory_info=False)
            out[n["NodeID"]] = int(reply.store_stats.cumulative_created_bytes)
    return out


def digest(batch) -> str:
    """A short content digest of a batch of images: which shard a unit of work read."""
    host = np.ascontiguousarray(backend.to_host(batch))
    return hashlib.blake2b(host.tobytes(), digest_size=8).hexdigest()


def shard_digest(shard: Shard) -> str:
    """The digest :func:`process` will report for ``shard`` (recomputed from its seed)."""
    return digest(kernels.make_batch(shard.images, seed=shard.seed, device=False))


# -- the work ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Processed:
    """One unit of work's output, stamped by :func:`process`."""

    node: str          # where the work ran
    digest: str        # of the images it read (identifies the shard)
    means: np.ndarray  # the kernel's output: one float32 per image


def process(batch) -> Processed:
    """Run the course kernel on ``batch`` and stamp where it ran: call it inside your tasks and actors."""
    means = backend.to_host(kernels.process(backend.to_device(batch) if backend.on_gpu() else batch))
    return Processed(here(), digest(batch), np.asarray(means))


# -- what a job did ----------------------------------------------------------------------------

@dataclass
class Trace:
    """Where a job ran each shard, and the bytes Ray copied, observed around one run."""

    shards: list                  # the shards (without their ObjectRefs)
    before: list                  # nodes holding each shard before the run
    after: list                   # ... and after
    results: list                 # what the job returned
    seconds: float
    ran_on: dict = field(default_factory=dict)  # shard index -> node that processed it (from stamps)
    returned: tuple = ()          # type names of what the job returned (for error messages)
    written: int = 0              # bytes the object stores created during the run (all nodes)

    @property
    def total_bytes(self) -> int:
        return sum(sh.nbytes for sh in self.shards)

    @property
    def local_bytes(self) -> int:
        """Bytes processed on a node that held the shard before the run."""
        return sum(sh.nbytes for sh in self.shards if self.ran_on.get(sh.index) in self.before[sh.index])

    @property
    def locality(self) -> float:
        """Fraction of the shards' bytes processed where they already were."""
        return self.local_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def moved_bytes(self) -> int:
        """Bytes of the new copies of shards that appeared on other nodes during the run."""
        return sum(sh.nbytes * len(self.after[sh.index] - self.before[sh.index]) for sh in self.shards)

    @property
    def images_per_s(self) -> float:
        return sum(sh.images for sh in self.shards) / self.seconds if self.seconds else 0.0

    def wrong(self) -> list[int]:
        """Indices of shards whose result is missing or does not match the reference output."""
        bad = []
        for sh in self.shards:
            got = self.results[sh.index] if sh.index < len(self.results) else None
            means = got.means if isinstance(got, Processed) else None
            if means is None or len(means) != sh.images or not kernels.matches(
                    means, kernels.reference_checksum(sh.images, seed=sh.seed)):
                bad.append(sh.index)
        return bad

    def summary(self) -> dict:
        return {"locality": round(self.locality, 3), "moved_MiB": round(self.moved_bytes / 2**20, 1),
                "images_per_s": round(self.images_per_s), "seconds": round(self.seconds, 3)}


def trace(run: Callable[[list], list], shards: list, *, clock=time.perf_counter) -> Trace:
    """Run ``run(shards)`` (a job) once, timed, and observe placement and transfers around it.

    Each returned :class:`Processed` is matched to its shard by digest, so a job may return
    results in any order, but each shard counts once.
    """
    before, stored = locations([sh.ref for sh in shards]), store_bytes()
    t0 = clock()
    results = run(shards)
    seconds = clock() - t0
    after = locations([sh.ref for sh in shards])
    written = sum(store_bytes().get(n, b) - b for n, b in stored.items())
    results = list(results) if results is not None else []
    by_digest = {shard_digest(sh): sh.index for sh in shards}
    ran_on, ordered = {}, [None] * len(shards)
    for r in results:
        if isinstance(r, Processed) and r.digest in by_digest:
            i = by_digest[r.digest]
            ran_on.setdefault(i, r.node)
            ordered[i] = ordered[i] or r
    kinds = tuple(sorted({type(r).__name__ for r in results}))
    # The trace keeps what each shard was, not the object: held refs would keep every round's
    # shards in the object stores until they spill to disk.
    kept = [replace(sh, ref=None) for sh in shards]
    return Trace(kept, before, after, ordered, seconds, ran_on, kinds, written)


def measure(job_class, nodes: Sequence[str], placements: dict, *, rounds: int = 2,
            images: int = SHARD_IMAGES, seed: int = 0) -> dict:
    """Make one job (``job_class(nodes)``), warm it up, and :func:`trace` it ``rounds`` times
    on each of the named ``placements`` (``{name: [node id per shard]}``): ``{name: [Trace]}``.

    Every round gets freshly produced shards, so copies left by one round cannot make the next
    look local. The job is released at the end (its actors go with their last handle).
    """
    job = job_class(list(nodes))
    try:
        job.run(make_shards(next(iter(placements.values())), images=64, seed=seed + 999))  # warm-up
        return {name: [trace(job.run, make_shards(place, images=images, seed=seed + r)) for r in range(rounds)]
                for name, place in placements.items()}
    finally:
        del job
        gc.collect()


# -- device-level affinity ---------------------------------------------------------------------

_copied = {"bytes": 0}


def to_device(batch):
    """Copy a host batch to the device: CuPy's host-to-device copy, or on a CPU a host copy
    standing in for it. Counted per process (:func:`copied_bytes`). A host batch is anything
    NumPy reads as an array (one a grader serves is read once per call)."""
    host = np.asarray(backend.to_host(batch))
    _copied["bytes"] += host.nbytes
    return backend.to_device(host) if backend.on_gpu() else np.array(host, copy=True)


def copied_bytes() -> int:
    """Bytes :func:`to_device` copied in this process so far."""
    return _copied["bytes"]
