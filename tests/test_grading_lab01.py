"""Lab 01 through real nbgrader: a submission that drives its actors with ray.get in a loop
and types numbers into its model loses exactly the points those parts earn."""

from __future__ import annotations

import pytest

from autograder import selfcheck
from notebooks import variant

LAB = "01_actor_scaling"

LOOP_DRIVER = '''
def run_pool(actors, batches, depth=2):
    """ray.get in a loop: right results, but one call in flight at a time."""
    return [ray.get(actors[i % len(actors)].process.remote(b)) for i, b in enumerate(batches)]
'''

HARD_CODED_MODEL = '''
def predict_throughput(n_actors, t_kernel, t_overhead):
    return 1200.0  # typed in from an earlier run


def fit_overhead(n_actors, throughputs):
    return 0.0008  # typed in from an earlier run
'''


@pytest.mark.slow
def test_loop_driver_and_hard_coded_model_lose_exactly_their_points(tmp_path):
    nb = variant(LAB, tmp_path / f"{LAB}.ipynb", demos=False,
                 replace={"run_pool": LOOP_DRIVER, "model": HARD_CODED_MODEL})
    outcome = selfcheck.grade_notebook(nb, cell_timeout_s=300)
    assert not outcome.error
    lost = {r.name: r.message for r in outcome.results if not r.passed}
    assert set(lost) == {"driver-concurrency", "driver-tier1", "driver-tier2",
                         "model-short-kernel", "model-long-kernel"}, lost
    assert all(r.score == 0 for r in outcome.results if r.name in lost)
    assert "ray.get in a loop" in lost["driver-concurrency"] and "ray.get in a loop" in lost["driver-tier1"]
    assert "synthetic" in lost["model-short-kernel"] and "synthetic" in lost["model-long-kernel"]
    assert outcome.score == outcome.max_score - 8
