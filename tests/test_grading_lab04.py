"""Lab 04 through real nbgrader: a job that hard-codes the notebook's placement and a job that
ignores placement each lose the locality and bytes points, with the measured fraction in the
message, and keep the points for what they did right (correct results, the other exercises).

Their throughput points depend on what the grader measures: moving bytes may or may not make
such a job slower than the reference on a given machine. A throughput tier they lose must say
so with a measured ratio below that tier.

(The solution's full marks and the blank lab's zero are tests/test_labs.py's.)
"""

from __future__ import annotations

import re

import pytest

from autograder import selfcheck
from autograder.targets import LAB04
from notebooks import variant

LAB = "04_data_affinity"

# Pins one actor on each of the notebook's NODES and sends shard i to NODES[i % 4]: right for
# the notebook's round-robin placement, wrong for the grader's.
HARD_CODED = '''
class PinnedJob:
    def __init__(self, nodes):
        self.workers = [Worker.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote()
                        for n in NODES]

    def run(self, shards):
        return ray.get([self.workers[i % len(NODES)].run.remote(sh.ref) for i, sh in enumerate(shards)])
'''

# Actors wherever Ray's default policy puts them: the naive job under another name.
IGNORES_PLACEMENT = '''
class PinnedJob:
    def __init__(self, nodes):
        self.workers = [Worker.remote() for _ in nodes]

    def run(self, shards):
        return ray.get([self.workers[i % len(self.workers)].run.remote(sh.ref) for i, sh in enumerate(shards)])
'''

LOST = {"pinned-locality-tier1": 2, "pinned-locality-tier2": 2, "pinned-bytes": 2}
MAY_LOSE = dict(zip(["pinned-throughput-tier1", "pinned-throughput-tier2"], LAB04.throughput_tiers))


@pytest.mark.slow
@pytest.mark.parametrize("job", [HARD_CODED, IGNORES_PLACEMENT], ids=["hard-coded", "ignores-placement"])
def test_misplaced_job_loses_exactly_the_locality_points(job, tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_SEED", "2024")
    monkeypatch.setenv("AUTOGRADER_CALL_TIMEOUT_S", "60")
    nb = variant(LAB, tmp_path / f"{LAB}.ipynb", replace={"pinned_job": job}, demos=False)
    outcome = selfcheck.grade_notebook(nb, LAB, cell_timeout_s=240)
    assert not outcome.error
    results = {r.name: r for r in outcome.results}
    failed = {n: r.max_score for n, r in results.items() if not r.passed}
    assert LOST.items() <= failed.items() and set(failed) <= set(LOST) | set(MAY_LOSE), \
        {n: r.message for n, r in results.items() if not r.passed}
    for name in set(failed) - set(LOST):
        ratio = re.search(r"processed (\d+\.\d\d)× the reference job's images/s", results[name].message)
        assert ratio and float(ratio.group(1)) < MAY_LOSE[name], results[name].message
    assert outcome.score == outcome.max_score - sum(failed.values())
    fraction = re.search(r"locality (\d\.\d\d): that fraction of the bytes", results["pinned-locality-tier1"].message)
    assert fraction and float(fraction.group(1)) < 0.8, results["pinned-locality-tier1"].message
    assert "naive placement copied" in results["pinned-bytes"].message
