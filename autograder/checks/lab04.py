"""Checks for 04_data_affinity: where the learner's job runs each shard, and the bytes it moves.

The grader produces its own shards on the notebook's emulated cluster (started fresh by the
locked setup cell in every grading run, so node ids copied from an earlier session are dead),
in a seeded, uneven placement that differs from the notebook's round-robin one. It runs the
learner's locality-aware job class on them under :func:`course.locality.trace`: where each
shard was processed comes from :func:`course.locality.process`'s stamps, the bytes copied
between object stores from Ray's object directory -- never from the job's own counters. The
naive placement (the reference's) is traced in the same run for the bytes target, and the
reference's locality-aware job is interleaved with the learner's for the throughput tiers
(each side's best round, as in lab 01: on a shared 2-core machine load only slows a run).
"""

from __future__ import annotations

import gc
import os
import random
import statistics

import numpy as np

from course import kernels, locality

from .. import harness
from ..reference import lab04 as ref
from ..targets import LAB04 as T
from . import register

LAB = "04_data_affinity"
SEED = int(os.environ.get("AUTOGRADER_SEED") or random.SystemRandom().randrange(2**31))


def grader_placement(nodes: list[str]) -> list[str]:
    """The grader's shard placement: seeded, uneven, never the notebook's round-robin."""
    for k in range(100):
        place = locality.scattered(nodes, T.shards, SEED + k)
        if place != locality.round_robin(nodes, T.shards):
            return place
    raise RuntimeError("no placement differs from round-robin")  # pragma: no cover


def _nodes() -> list[str]:
    nodes = locality.start()
    if len(nodes) < 2:
        raise AssertionError(f"the emulated cluster has {len(nodes)} node(s) left; was it shut down?")
    return nodes


def _make(cls, nodes, what):
    return harness.call(cls, list(nodes), what=f"{what}(nodes)", timeout_s=T.call_timeout_s)


def _trace(job, shards, what) -> locality.Trace:
    run = getattr(job, "run", None)
    if not callable(run):
        raise AssertionError(f"{what} has no run(shards) method")

    def traced(shards):  # a new function per call: one hung run does not bar the next job's
        return locality.trace(run, shards)

    tr = harness.call(traced, shards, what=f"{what}.run(shards)", timeout_s=T.call_timeout_s)
    if not any(tr.results):
        raise AssertionError(f"{what}.run(shards) returned no locality.process results for the grader's "
                             f"shards (got {', '.join(tr.returned) or 'nothing'}); return what "
                             "locality.process returned, e.g. via ray.get")
    return tr


_measured: dict = {}
GRADER = "the grader's reference job"  # its runs get the same deadline as the learner's


def measure_pinned(PinnedJob) -> dict:
    """The learner's locality-aware job on the grader's shards, against naive and reference jobs."""

    def run():
        nodes = _nodes()
        place = grader_placement(nodes)
        seeds = iter(range(SEED % 10_000 * 100, SEED % 10_000 * 100 + 100))

        def shards(images=locality.SHARD_IMAGES):
            return locality.make_shards(place, images=images, seed=next(seeds))

        learner = _make(PinnedJob, nodes, "PinnedJob")
        reference = ref.PinnedJob(nodes)
        try:
            _trace(learner, shards(64), "PinnedJob")  # warm-ups, discarded
            _trace(reference, shards(64), GRADER)
            naive = ref.NaiveJob(nodes)
            _trace(naive, shards(64), GRADER)
            naive_trace = _trace(naive, shards(), GRADER)
            del naive
            ours, theirs = [], []
            for r in range(T.rounds):
                for side in (("learner", "reference") if r % 2 == 0 else ("reference", "learner")):
                    if side == "learner":
                        ours.append(_trace(learner, shards(), "PinnedJob"))
                    else:
                        theirs.append(_trace(reference, shards(), GRADER))
        finally:
            del learner, reference
            gc.collect()
        total = sum(t.total_bytes for t in ours)
        return {
            "locality": sum(t.local_bytes for t in ours) / total,
            "moved": statistics.median(t.moved_bytes for t in ours),
            "naive_moved": naive_trace.moved_bytes,
            "naive_locality": naive_trace.locality,
            # each side's best round: load on a shared machine only ever slows a run down
            "ratio": max(t.images_per_s for t in ours) / max(t.images_per_s for t in theirs),
            "wrong": sorted({i for t in ours for i in t.wrong()}),
            "shards": T.shards,
        }

    return harness.memo(_measured, PinnedJob, run)


@register(LAB, "shard-nodes", 2)
def shard_nodes_correct(shard_nodes):
    """shard_nodes(refs) names every node holding a copy of each object, as Ray's directory does."""
    nodes = _nodes()
    shards = locality.make_shards(grader_placement(nodes)[:4], images=64, seed=SEED % 997)
    # a second copy of one shard, on a node it was not made on
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    other = next(n for n in nodes if n not in locality.locations([shards[0].ref])[0])
    pull = ray.remote(num_cpus=0)(lambda batch: None)
    ray.get(pull.options(scheduling_strategy=NodeAffinitySchedulingStrategy(other, soft=False)).remote(shards[0].ref))
    refs = [sh.ref for sh in shards]
    truth = locality.locations(refs)
    got = harness.call(shard_nodes, refs, what="shard_nodes(refs)", timeout_s=T.call_timeout_s)
    try:
        got = [set(g) for g in got]
    except TypeError:
        raise AssertionError(f"shard_nodes returned {type(got).__name__}; expected one collection of "
                             "node ids per ref") from None
    if len(got) != len(refs):
        raise AssertionError(f"shard_nodes returned {len(got)} entries for {len(refs)} refs")
    for i, (g, t) in enumerate(zip(got, truth)):
        if g != t:
            raise AssertionError(f"object {i}: shard_nodes says {sorted(x[:8] for x in g)}, Ray's object "
                                 f"directory says {sorted(x[:8] for x in t)} (node ids shortened)")


@register(LAB, "pinned-correct", 2)
def pinned_correct(PinnedJob):
    """Every shard of the grader's is processed, with the right result (checksums)."""
    m = measure_pinned(PinnedJob)
    if m["wrong"]:
        raise AssertionError(f"{len(m['wrong'])} of {m['shards']} shards missing or wrong in PinnedJob's results "
                             f"(shards {m['wrong'][:5]}); process each shard once with locality.process")


def _locality(m: dict, tier: float) -> None:
    if m["locality"] < tier:
        raise AssertionError(
            f"locality {m['locality']:.2f}: that fraction of the bytes was processed on a node holding them "
            f"(grader's own placement of {m['shards']} shards; the naive placement measured "
            f"{m['naive_locality']:.2f}); needs ≥ {tier}. Pin by the nodes Ray reports for each shard, "
            "not by node ids or positions from the notebook")


@register(LAB, "pinned-locality-tier1", 2)
def pinned_locality_tier1(PinnedJob):
    """Locality ≥ the first tier on the grader's placement."""
    _locality(measure_pinned(PinnedJob), T.locality_tiers[0])


@register(LAB, "pinned-locality-tier2", 2)
def pinned_locality_tier2(PinnedJob):
    """Locality ≥ the top tier on the grader's placement."""
    _locality(measure_pinned(PinnedJob), T.locality_tiers[1])


@register(LAB, "pinned-bytes", 2)
def pinned_bytes(PinnedJob):
    """Bytes copied between nodes ≤ a fraction of the naive placement's, same run."""
    m = measure_pinned(PinnedJob)
    limit = T.bytes_vs_naive * m["naive_moved"]
    if m["moved"] > limit:
        raise AssertionError(f"PinnedJob made Ray copy {m['moved'] / 2**20:.1f} MiB between nodes per run; "
                             f"the naive placement copied {m['naive_moved'] / 2**20:.1f} MiB in the same run "
                             f"(limit {T.bytes_vs_naive}× = {limit / 2**20:.1f} MiB)")


def _throughput(m: dict, tier: float) -> None:
    if m["ratio"] < tier:
        raise AssertionError(f"PinnedJob processed {m['ratio']:.2f}× the reference job's images/s "
                             f"(best of {T.rounds} interleaved rounds each); needs ≥ {tier}×")


@register(LAB, "pinned-throughput-tier1", 1)
def pinned_throughput_tier1(PinnedJob):
    """Images/s ≥ the first tier × the reference locality-aware job's, interleaved."""
    _throughput(measure_pinned(PinnedJob), T.throughput_tiers[0])


@register(LAB, "pinned-throughput-tier2", 1)
def pinned_throughput_tier2(PinnedJob):
    """Images/s ≥ the second tier × the reference locality-aware job's, interleaved."""
    _throughput(measure_pinned(PinnedJob), T.throughput_tiers[1])


@register(LAB, "resident-copies", 2)
def resident_copies(ResidentWorker):
    """A resident worker copies its shard to the device once, however often it runs, and is right."""
    batch = kernels.make_batch(T.resident_images, seed=SEED % 991, device=False)
    expected = kernels.reference_checksum(T.resident_images, seed=SEED % 991)
    before = locality.copied_bytes()
    worker = harness.call(ResidentWorker, batch, what="ResidentWorker(batch)", timeout_s=T.call_timeout_s)
    run = getattr(worker, "run", None)
    for i in range(T.resident_calls):
        out = harness.call(run, what="ResidentWorker.run()", timeout_s=T.call_timeout_s)
        if not kernels.matches(out, expected):
            raise AssertionError(f"ResidentWorker.run() call {i + 1} returned a wrong result (checksum differs)")
    copies = (locality.copied_bytes() - before) / batch.nbytes
    if copies == 0:
        raise AssertionError("ResidentWorker never copied its shard to the device: use locality.to_device")
    if copies > 1:
        raise AssertionError(f"ResidentWorker copied {copies:g}× its shard's bytes over {T.resident_calls} "
                             "calls; a resident worker copies once, in __init__")


@register(LAB, "link-bytes", 1)
def link_bytes(link_bytes_per_s):
    """link_bytes_per_s agrees with the formula on inputs the grader draws."""
    rng = random.Random(SEED + 4)
    for _ in range(5):
        args = (rng.uniform(1e3, 1e5), rng.choice([64 * 64, 224 * 224 * 3]), rng.randint(2, 256), rng.random())
        got = harness.call(link_bytes_per_s, *args, what=f"link_bytes_per_s{tuple(round(a, 3) for a in args)}",
                           timeout_s=T.call_timeout_s)
        want = ref.link_bytes_per_s(*args)
        if not isinstance(got, (int, float, np.floating)) or not np.isclose(got, want, rtol=1e-6):
            raise AssertionError(f"link_bytes_per_s{tuple(round(a, 3) for a in args)} = {got!r}; expected {want:.6g}")


def calibrate() -> list[str]:
    """The reference's own numbers on this machine (for ``python -m autograder calibrate``)."""
    m = measure_pinned(ref.PinnedJob)
    return [f"reference PinnedJob: locality {m['locality']:.2f}, {m['moved'] / 2**20:.1f} MiB moved; "
            f"naive: locality {m['naive_locality']:.2f}, {m['naive_moved'] / 2**20:.1f} MiB moved; "
            f"reference vs itself {m['ratio']:.2f}×",
            f"tiers: locality {T.locality_tiers}, bytes ≤ {T.bytes_vs_naive}× naive, throughput {T.throughput_tiers}"]
