"""Lab 04's checks and the locality harness, called directly on an emulated cluster.

The harness sees placement, copies and bytes written; the grader's shard store and host batch
keep their seeds and counts from learner code; a job that ships its
shards' bytes elsewhere, a worker that copies on every call, a wrong directory answer and a
wrong formula each fail their own check with a reason. (Whole notebooks -- the solution,
a misplaced job, forged results -- are graded through real nbgrader in tests/test_labs.py and
tests/test_attacks.py.)
"""

from __future__ import annotations

import dataclasses
import re
import sys

import pytest
import ray
from ray import cloudpickle

from autograder.grader.session.catalog import for_lab
from autograder.labs.lab04 import checks as lab04
from autograder.labs.lab04 import reference as ref
from autograder.grader.session.catalog import reference as namespace
from autograder.grader.session.session import Session
from autograder.labs.lab04 import instruments
from autograder.transport import Learner
from course import kernels, locality

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import this module

MEASURED = {"shard-nodes", "pinned-correct", "pinned-locality-tier1", "pinned-locality-tier2", "pinned-bytes",
            "pinned-throughput-tier1", "pinned-throughput-tier2", "resident-copies"}


def session(**learner) -> Session:
    return Session(lab04.LAB, seed=2024, learner=Learner(namespace={**namespace(lab04.LAB), **learner}))


def test_points():
    checks = for_lab(lab04.LAB)
    assert sum(c.points for c in checks.values()) >= 15
    assert sum(checks[n].points for n in MEASURED) >= 8


def test_placements_are_seeded_uneven_and_not_round_robin():
    nodes = [f"n{i}" for i in range(4)]
    a, b = locality.scattered(nodes, 12, 1), locality.scattered(nodes, 12, 1)
    assert a == b and set(a) == set(nodes)
    assert locality.round_robin(nodes, 6) == ["n0", "n1", "n2", "n3", "n0", "n1"]
    assert lab04.grader_placement(nodes, 5) != locality.round_robin(nodes, lab04.T.shards)


def test_link_bytes_formula():
    assert session(link_bytes_per_s=ref.link_bytes_per_s).run("link-bytes").passed
    r = session(link_bytes_per_s=lambda ips, b, n, loc: ips * b * loc / n).run("link-bytes")
    assert not r.passed and "expected" in r.message


def _run(holders_before, holders_after, written_before, written_after, images=64) -> lab04.Run:
    return lab04.Run(images, [1, 2], {"holders": holders_before, "written": written_before},
                     {"holders": holders_after, "written": written_after}, 1.0, [])


def test_locality_comes_from_copies_and_bytes_written():
    mib = 64 * 64 * 64
    kept = _run([["a"], ["b"]], [["a"], ["b"]], {"a": 0, "b": 0}, {"a": 0, "b": 0})
    assert kept.locality == 1.0 and kept.moved == 0
    copied = _run([["a"], ["b"]], [["a", "b"], ["b"]], {"a": 0, "b": 0}, {"a": 0, "b": mib})
    assert copied.locality == 0.5 and copied.moved == mib
    # no copy of a shard, but its bytes were shipped some other way (a task returned them)
    shipped = _run([["a"], ["b"]], [["a"], ["b"]], {"a": 0, "b": 0}, {"a": 2 * mib, "b": 0})
    assert shipped.locality == 0.0 and shipped.moved == 2 * mib
    # a shard whose copies vanished (freed by the job) counts as moved, not as kept
    freed = _run([["a"], ["b"]], [[], ["b"]], {"a": 0, "b": 0}, {"a": 0, "b": 0})
    assert freed.locality == 0.5 and freed.moved == mib
    assert kept.wrong() == [0, 1]  # no results at all


@pytest.fixture(scope="module")
def nodes():
    from course import cluster

    yield locality.start()
    cluster.stop()


@pytest.mark.slow
def test_trace_sees_placement_copies_and_bytes_written(nodes):
    shards = locality.make_shards(locality.round_robin(nodes, 4), images=64, seed=5)
    assert [locality.locations([sh.ref])[0] for sh in shards] == [{n} for n in nodes]
    naive = locality.trace(ref.TaskJob(nodes).run, shards)
    assert not naive.wrong() and naive.total_bytes == 4 * 64 * 64 * 64
    # everything on the head node: three of four shards are processed away from their data
    head = ref.Worker.options(scheduling_strategy=locality.NodeAffinitySchedulingStrategy(nodes[0], soft=False)).remote()
    far = locality.trace(lambda shs: ray.get([head.run.remote(sh.ref) for sh in shs]),
                         locality.make_shards(locality.round_robin(nodes, 4), images=64, seed=6))
    assert far.locality == pytest.approx(0.25) and far.moved_bytes == 3 * 64 * 64 * 64
    assert far.written >= 3 * 64 * 64 * 64
    assert set(far.ran_on.values()) == {nodes[0]}


@pytest.mark.slow
def test_the_grader_store_and_batch_are_closed_to_learner_code(nodes):
    key = b"k" * 32
    store = instruments.shard_store(key)
    ray.get(store.make.remote(key.hex(), "s", nodes[:2], [11, 12], 64))
    shards = ray.get(store.shards.remote("s"))
    assert [sh.seed for sh in shards] == [None, None] and len(ray.get(store.locations.remote("s"))) == 2
    for sneak in (lambda: store.drop.remote(b"x".hex() * 32, "s"), lambda: store.__ray_call__.remote(print)):
        with pytest.raises((ray.exceptions.RayTaskError, AttributeError, PermissionError)):
            ray.get(sneak())
    source = instruments.BatchSource.remote(8, 3)
    batch = instruments.HostBatch(source, 8)
    locality.to_device(batch)
    kernels.process(batch)  # reads the bytes too
    assert ray.get(source.reads.remote()) == 2


@ray.remote(num_cpus=1)
class Shipper:
    """Reads a shard where it lies and returns its bytes: the driver then does the work."""

    def read(self, batch):
        return batch.copy()


class ShipsBytes:
    """Actors pinned where the data is, which ship every shard's bytes to the driver."""

    def __init__(self, nodes):
        self.workers = {n: Shipper.options(scheduling_strategy=locality.NodeAffinitySchedulingStrategy(n, soft=False))
                        .remote() for n in nodes}

    def run(self, shards):
        held = ref.shard_nodes([sh.ref for sh in shards])
        return [locality.process(ray.get(self.workers[min(h)].read.remote(sh.ref))) for sh, h in zip(shards, held)]


class CopiesEveryCall:
    def __init__(self, batch):
        self.host = batch

    def run(self):
        return kernels.process(locality.to_device(self.host))


@pytest.mark.slow
def test_each_wrong_answer_fails_its_own_check(nodes, monkeypatch):
    monkeypatch.setattr(lab04, "T", dataclasses.replace(lab04.T, rounds=2, shards=6))
    bad = session(PinnedJob=ShipsBytes, ResidentWorker=CopiesEveryCall,
                  shard_nodes=lambda refs: [set() for _ in refs])
    got = {name: bad.run(name) for name in bad.checks}
    assert {n for n, r in got.items() if not r.passed} >= {
        "shard-nodes", "pinned-locality-tier1", "pinned-locality-tier2", "pinned-bytes", "resident-copies"}
    assert got["pinned-correct"].passed and got["link-bytes"].passed
    assert re.search(r"locality 0\.\d\d: that fraction", got["pinned-locality-tier1"].message)
    assert float(re.search(r"locality (\d\.\d\d)", got["pinned-locality-tier1"].message).group(1)) < 0.5
    assert "shard_nodes says []" in got["shard-nodes"].message
    assert "copied its shard from host memory 5× over 5 calls" in got["resident-copies"].message
