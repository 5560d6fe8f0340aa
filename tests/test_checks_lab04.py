"""Lab 04's checks and the locality harness, called directly on an emulated cluster.

The harness sees placement and copies; the reference passes; a wrong directory answer, a
worker that copies on every call and a wrong formula each fail their own check with a reason.
(The measured PinnedJob checks run through real nbgrader in tests/test_labs.py and
tests/test_grading_lab04.py.)
"""

from __future__ import annotations

import pytest
import ray

from autograder.checks import for_lab, lab04
from autograder.reference import lab04 as ref
from course import kernels, locality

MEASURED = {"shard-nodes", "pinned-correct", "pinned-locality-tier1", "pinned-locality-tier2", "pinned-bytes",
            "pinned-throughput-tier1", "pinned-throughput-tier2", "resident-copies"}


def test_points():
    checks = for_lab(lab04.LAB)
    assert sum(c.points for c in checks.values()) >= 15
    assert sum(checks[n].points for n in MEASURED) >= 8


def test_placements_are_seeded_uneven_and_not_round_robin():
    nodes = [f"n{i}" for i in range(4)]
    a, b = locality.scattered(nodes, 12, 1), locality.scattered(nodes, 12, 1)
    assert a == b and set(a) == set(nodes)
    assert locality.round_robin(nodes, 6) == ["n0", "n1", "n2", "n3", "n0", "n1"]
    assert lab04.grader_placement(nodes) != locality.round_robin(nodes, lab04.T.shards)


def test_link_bytes_formula():
    lab04.link_bytes(ref.link_bytes_per_s)
    with pytest.raises(AssertionError, match="expected"):
        lab04.link_bytes(lambda ips, b, n, loc: ips * b * loc / n)


class CopiesEveryCall:
    def __init__(self, batch):
        self.host = batch

    def run(self):
        return kernels.process(locality.to_device(self.host))


class NeverCopies:
    def __init__(self, batch):
        self.host = batch

    def run(self):
        return kernels.process(self.host)


def test_resident_worker_copies_once():
    lab04.resident_copies(ref.ResidentWorker)
    with pytest.raises(AssertionError, match=r"copied 5× its shard's bytes over 5 calls"):
        lab04.resident_copies(CopiesEveryCall)
    with pytest.raises(AssertionError, match="never copied its shard to the device"):
        lab04.resident_copies(NeverCopies)


@pytest.fixture(scope="module")
def nodes():
    from course import cluster

    yield locality.start()
    cluster.stop()


@pytest.mark.slow
def test_trace_sees_placement_and_copies(nodes):
    shards = locality.make_shards(locality.round_robin(nodes, 4), images=64, seed=5)
    assert [locality.locations([sh.ref])[0] for sh in shards] == [{n} for n in nodes]
    naive = locality.trace(ref.TaskJob(nodes).run, shards)
    assert not naive.wrong() and naive.total_bytes == 4 * 64 * 64 * 64
    # everything on the head node: three of four shards are processed away from their data
    head = ref.Worker.options(scheduling_strategy=locality.NodeAffinitySchedulingStrategy(nodes[0], soft=False)).remote()
    far = locality.trace(lambda shs: ray.get([head.run.remote(sh.ref) for sh in shs]),
                         locality.make_shards(locality.round_robin(nodes, 4), images=64, seed=6))
    assert far.locality == pytest.approx(0.25) and far.moved_bytes == 3 * 64 * 64 * 64
    assert set(far.ran_on.values()) == {nodes[0]}


@pytest.mark.slow
def test_shard_nodes_check_compares_with_the_directory(nodes):
    # (the measured PinnedJob checks run through real nbgrader: tests/test_labs.py and
    # tests/test_grading_lab04.py)
    lab04.shard_nodes_correct(ref.shard_nodes)
    with pytest.raises(AssertionError, match="shard_nodes says"):
        lab04.shard_nodes_correct(lambda refs: [set() for _ in refs])
    with pytest.raises(AssertionError, match="entries for 4 refs"):
        lab04.shard_nodes_correct(lambda refs: [set()])
