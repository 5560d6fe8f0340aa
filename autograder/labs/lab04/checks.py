"""Checks for 04_data_affinity: where the learner's job reads each shard, and the bytes it moves.

All grader-side (see :mod:`autograder.checks`). The grader owns the lab's Ray: a process of its
own starts the emulated multi-node cluster, and the learner's kernel joins it; graded sandboxed,
the reference's jobs run on a second emulated cluster of the same shape, out of the kernel's
sight (the lab's spec: ``reference_ray``), with a shard store of their own; the learner's side
is at idle CPU priority, not frozen, while they are timed (its spec's ``pause_learner``). Each side's *shard store*
(:class:`autograder.labs.lab04.instruments.ShardStore`, an actor learner code can read from but
not change) produces fresh seeded shards for every round, in a seeded, uneven placement unlike
the notebook's round-robin one, and hands them out without their seeds.

What a job did is read from Ray, by the grader, around each run -- never from the job:

* **where the bytes were read**: the store's object directory before and after the run. A
  shard read where it lay gains no copy; one read elsewhere gains a copy on that node.
* **bytes written**: each node's object-store counter (``cumulative_created_bytes``) before
  and after. A job that ships a shard's contents to another node some other way (a copy as a
  task's result, a ``ray.put``) writes those bytes too.
* **correctness**: each result's content digest and per-image means against the grader's
  own computation from its seeds. The node a result claims it ran on is not used.

The learner's job and the reference's run the same kit step on the same kind of shards, in the
same placement by node position, interleaved, timed by the grader's clock; the naive placement
is measured in the same run (on the reference's side) for the bytes target. The resident
worker reads a grader-served host batch whose source counts every read.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from course import kernels, locality

from . import LAB
from .targets import TARGETS as T
from ...transport import named, stashed
from ...checks import register, tiers

if TYPE_CHECKING:
    from ...grader.session.session import Session


# ---------------------------------------------------------------- the grader's shards

def grader_placement(nodes: list[str], seed: int) -> list[str]:
    """The grader's shard placement: seeded, uneven, never the notebook's round-robin."""
    for k in range(100):
        place = locality.scattered(nodes, T.shards, seed + k)
        if place != locality.round_robin(nodes, T.shards):
            return place
    raise RuntimeError("no placement differs from round-robin")  # pragma: no cover


@dataclass
class Run:
    """One run of a job on one set of the grader's shards, as the grader observed it."""

    images: int            # per shard
    seeds: list            # the shards' make_batch seeds
    before: dict           # observe() before the run
    after: dict            # ... and after
    seconds: float         # the grader's clock
    results: list          # run_job's plain results

    @property
    def shard_bytes(self) -> int:
        return self.images * kernels.IMAGE_SIZE**2

    @property
    def total_bytes(self) -> int:
        return self.shard_bytes * len(self.seeds)

    @property
    def written(self) -> int:
        """Bytes the object stores wrote during the run (copies, large results, puts)."""
        w0, w1 = self.before["written"], self.after["written"]
        return max(0, sum(w1.get(n, b) - b for n, b in w0.items()))

    @property
    def kept_in_place(self) -> int:
        """Shards whose holders did not change during the run: read only where they lay."""
        return sum(set(a) == set(b) for b, a in zip(self.before["holders"], self.after["holders"]))

    @property
    def moved(self) -> int:
        """Bytes moved: new or vanished copies of shards, or all bytes written, whichever is more."""
        copies = sum(len(set(a) ^ set(b)) for b, a in zip(self.before["holders"], self.after["holders"]))
        return max(copies * self.shard_bytes, self.written)

    @property
    def locality(self) -> float:
        """Fraction of the bytes read where they lay: shards kept in place, less any bytes written."""
        kept = self.kept_in_place * self.shard_bytes / self.total_bytes
        return max(0.0, min(kept, 1.0 - self.written / self.total_bytes))

    @property
    def images_per_s(self) -> float:
        return self.images * len(self.seeds) / self.seconds if self.seconds else 0.0

    def wrong(self) -> list[int]:
        """Shards with no result of the right content and means (matched by content digest)."""
        by_digest = {}
        for r in self.results:
            if isinstance(r, dict) and isinstance(r.get("digest"), str) and isinstance(r.get("means"), list):
                by_digest.setdefault(r["digest"], r["means"])
        bad = []
        for i, seed in enumerate(self.seeds):
            batch = kernels.make_batch(self.images, seed=seed, device=False)
            means = by_digest.get(locality.digest(batch))
            if not (means is not None and len(means) == self.images
                    and all(isinstance(x, (int, float)) for x in means)
                    and kernels.matches(means, kernels.reference_checksum(self.images, seed))):
                bad.append(i)
        return bad


class Dataset:
    """The grader's shard store and placement on one side's cluster for one grading run, and a
    job runner on it. ``grader`` is the grader's process on that cluster (:meth:`Session.ray_of
    <autograder.grader.session.session.Session.ray_of>`); ``salt``, the stream its shards' seeds come from."""

    def __init__(self, session: Session, grader, salt: int = 4):
        self.session, self.grader, self.key = session, grader, session.key.hex()
        self.nodes = grader.kit.node_ids(what="the grader's cluster", timeout_s=60)
        if len(self.nodes) < 2:
            raise AssertionError(f"the grader's cluster has {len(self.nodes)} node(s)")
        self.store = {"handle": grader.kit.shard_store(self.key, what="the grader's shard store", timeout_s=60)}
        self.placement = grader_placement(self.nodes, session.seed)  # by node position: alike on both clusters
        self._rng, self._count = session.rng(salt), 0

    @classmethod
    def of(cls, session: Session, side) -> Dataset:
        """The dataset on ``side``'s cluster (the learner's or the reference's)."""
        return cls(session, session.ray_of(side), salt=4 if side is session.learner else 7)

    def make(self, placement: list, images: int) -> tuple[str, list]:
        """New shards (fresh seeds) on ``placement``: their name and seeds."""
        self._count += 1
        name, seeds = f"set{self._count}", [self._rng.randrange(2**31) for _ in placement]
        self.grader.kit.produce(self.store, self.key, name, list(placement), seeds, images,
                                what="the grader's shards", timeout_s=120)
        return name, seeds

    def observe(self, name: str) -> dict:
        seen = self.grader.kit.observe(self.store, name, what="Ray's object directory", timeout_s=60)
        if not (isinstance(seen, dict) and isinstance(seen.get("holders"), list)
                and isinstance(seen.get("written"), dict)):
            raise RuntimeError(f"unexpected observation {str(seen)[:80]}")
        return seen

    def run(self, side, job: str, what: str, images: int = locality.SHARD_IMAGES) -> Run:
        """One run of the job kept as ``job`` on ``side`` (learner or reference), on fresh shards."""
        name, seeds = self.make(self.placement, images)
        try:
            before = self.observe(name)
            seconds, results = side.kit.run_job.timed(stashed(job), self.store, name, what=f"{what}.run(shards)")
            after = self.observe(name)
        finally:
            self.grader.kit.drop(self.store, self.key, name, what="dropping the grader's shards", timeout_s=60)
        if not isinstance(results, list):
            raise AssertionError(f"{what}.run(shards) returned no list of results")
        return Run(images, seeds, before, after, seconds, results)


# ---------------------------------------------------------------- shard_nodes

@register(LAB, "shard-nodes")
def shard_nodes_correct(session):
    """shard_nodes(refs) names every node holding a copy of each object, as Ray's directory does."""
    data = Dataset.of(session, session.learner)
    name, _ = data.make(data.placement[:4], 64)
    holders = data.observe(name)["holders"]
    other = next(n for n in data.nodes if n not in holders[0])
    data.grader.kit.copy_shard(data.store, data.key, name, 0, other, what="a second copy", timeout_s=60)
    truth = data.observe(name)["holders"]
    got = session.learner.kit.ask_shard_nodes(named("shard_nodes"), data.store, name, what="shard_nodes(refs)")
    after = data.observe(name)["holders"]  # the answer may also be Ray's directory just after the call
    if not (isinstance(got, list) and all(isinstance(g, list) for g in got)):
        raise AssertionError("shard_nodes returned something other than one collection of node ids per ref")
    if len(got) != len(truth):
        raise AssertionError(f"shard_nodes returned {len(got)} entries for {len(truth)} refs")
    for i, g in enumerate(got):
        if set(g) != set(truth[i]) and set(g) != set(after[i]):
            raise AssertionError(f"object {i}: shard_nodes says {sorted(str(x)[:8] for x in g)}, Ray's object "
                                 f"directory says {sorted(x[:8] for x in truth[i])} (node ids shortened)")


# ---------------------------------------------------------------- PinnedJob

@dataclass
class Pinned:
    """The learner's PinnedJob as measured: its runs (all with correct results), the naive job's run,
    and the throughput ratio."""

    runs: list
    naive: Run
    ratio: float
    rounds: int  # interleaved rounds timed (fewer than T.rounds once the tiers' verdicts were decided)

    @property
    def locality(self) -> float:
        return sum(r.locality * r.total_bytes for r in self.runs) / sum(r.total_bytes for r in self.runs)

    @property
    def moved(self) -> float:
        return statistics.median(r.moved for r in self.runs)


def measure_pinned(session: Session) -> Pinned:
    """The learner's locality-aware job on the grader's shards, against the naive and reference jobs
    (those two on the reference's cluster, where it has one of its own)."""
    learner = session.learner
    data = Dataset.of(session, learner)
    # distinct keys: outside grading, both sides keep their jobs in the same process
    learner.kit.make_job(named("PinnedJob"), data.nodes, what="PinnedJob(nodes)", keep="job")
    runs, ref = [], None

    def mine(images: int = locality.SHARD_IMAGES) -> float:
        run = data.run(learner, "job", "PinnedJob", images=images)
        if run.wrong():
            raise AssertionError(_wrong(run.wrong(), len(run.seeds)))
        runs.append(run)
        return run.seconds

    try:
        mine(images=64)  # a warm-up, discarded; a job with wrong results costs no more time, nor a reference start
        ref = session.reference
        theirs_data = data if session.ray_of(ref) is data.grader else Dataset.of(session, ref)
        ref.kit.make_job(named("PinnedJob"), theirs_data.nodes, what="the reference PinnedJob", keep="reference-job",
                         timeout_s=60)
        ref.kit.make_job(named("NaiveJob"), theirs_data.nodes, what="the naive job", keep="naive-job", timeout_s=60)

        def theirs() -> float:
            return theirs_data.run(ref, "reference-job", "the reference PinnedJob").seconds

        naive = theirs_data.run(ref, "naive-job", "the naive job")  # its bytes only: not timed, not warmed up
        ref.kit.forget("naive-job", what="releasing the naive job", timeout_s=60)
        runs.clear()
        timed = session.side_by_side(mine, theirs, rounds=T.rounds, stop_below=T.throughput_tiers[0] / 2,
                                     tiers=T.throughput_tiers)
    finally:
        learner.kit.forget("job", what="releasing PinnedJob", timeout_s=60)
        if ref is not None:
            ref.kit.forget("reference-job", what="releasing the reference job", timeout_s=60)
    return Pinned(runs, naive, timed.ratio, len(timed.ratios))


def _wrong(bad: list[int], shards: int) -> str:
    return (f"{len(bad)} of {shards} shards missing or wrong in PinnedJob's results (shards {bad[:5]}); "
            "process each shard once with locality.process and return what it returned")


def _pinned(session: Session) -> Pinned:
    return session.memo(measure_pinned, lambda: measure_pinned(session))


@register(LAB, "pinned-correct")
def pinned_correct(session):
    """Every shard of the grader's is processed, with the right result (checksums)."""
    _pinned(session)  # a wrong result fails the measurement itself


def _locality(session: Session, tier: float) -> None:
    m = _pinned(session)
    if m.locality < tier:
        raise AssertionError(
            f"locality {m.locality:.2f}: that fraction of the bytes was read where it lay (the grader's own "
            f"placement of {T.shards} shards, from Ray's object directory and object-store counters; the naive "
            f"placement measured {m.naive.locality:.2f}); needs ≥ {tier}. Pin by the nodes Ray reports for "
            "each shard, not by node ids or positions from the notebook")


@register(LAB, "pinned-locality-tier1")
def pinned_locality_tier1(session):
    """Locality ≥ the first tier on the grader's placement."""
    _locality(session, T.locality_tiers[0])


@register(LAB, "pinned-locality-tier2")
def pinned_locality_tier2(session):
    """Locality ≥ the top tier on the grader's placement."""
    _locality(session, T.locality_tiers[1])


@register(LAB, "pinned-bytes")
def pinned_bytes(session):
    """Bytes moved between nodes ≤ a fraction of the naive placement's, same run."""
    m = _pinned(session)
    limit = T.bytes_vs_naive * m.naive.moved
    if m.moved > limit:
        raise AssertionError(f"PinnedJob made Ray move {m.moved / 2**20:.1f} MiB between nodes per run; the naive "
                             f"placement moved {m.naive.moved / 2**20:.1f} MiB in the same run "
                             f"(limit {T.bytes_vs_naive}× = {limit / 2**20:.1f} MiB)")


tiers(LAB, ("pinned-throughput-tier1", "pinned-throughput-tier2"), T.throughput_tiers, _pinned,
      lambda m, need: (f"PinnedJob processed {m.ratio:.2f}× the reference job's images/s (median of "
                       f"{m.rounds} interleaved rounds); needs ≥ {need}×"))


# ---------------------------------------------------------------- ResidentWorker, link bytes

@register(LAB, "resident-copies")
def resident_copies(session):
    """A resident worker reads its host batch once, however often it runs, and is right."""
    seed, grader = session.rng(5).randrange(2**31), session.ray_of(session.learner)
    source = {"handle": grader.kit.batch_source(T.resident_images, seed, what="the grader's host batch",
                                                timeout_s=60)}
    outs = session.learner.kit.resident(named("ResidentWorker"), source, T.resident_images,
                                        T.resident_calls, what="ResidentWorker(batch) and its run()", returns="arrays")
    expected = kernels.reference_checksum(T.resident_images, seed=seed)
    for i, out in enumerate(outs):
        if out["shape"] != [T.resident_images] or not kernels.matches(out["data"], expected):
            raise AssertionError(f"ResidentWorker.run() call {i + 1} returned a wrong result (checksum differs)")
    if len(outs) != T.resident_calls:
        raise AssertionError(f"{len(outs)} results for {T.resident_calls} calls")
    reads = grader.kit.reads(source, what="the host batch's reads", timeout_s=60)
    if reads > 1:
        raise AssertionError(f"ResidentWorker copied its shard from host memory {reads}× over {T.resident_calls} "
                             "calls; a resident worker copies once, in __init__ (locality.to_device)")


@register(LAB, "link-bytes")
def link_bytes(session):
    """link_bytes_per_s agrees with the formula on inputs the grader draws."""
    import math

    rng = session.rng(6)
    for _ in range(5):
        args = [rng.uniform(1e3, 1e5), rng.choice([64 * 64, 224 * 224 * 3]), rng.randint(2, 256), rng.random()]
        shown = tuple(round(a, 3) for a in args)
        got = session.learner.call("link_bytes_per_s", *args, what=f"link_bytes_per_s{shown}", returns="number")
        want = args[0] * args[1] * (1.0 - args[3]) / args[2]  # the remote share, spread over the nodes' links
        if not math.isclose(got, want, rel_tol=1e-6):
            raise AssertionError(f"link_bytes_per_s{shown} = {got!r}; expected {want:.6g}")
