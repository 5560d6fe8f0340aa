"""Lab 02 through real nbgrader: a submission without retries and without checkpoints loses
exactly the points of the guarantees it broke, with messages that name them.

(The solution's full marks and the blank lab's 0 are in test_labs.py.) One submission carries
both faults, to keep CI short: each fault is scored by its own checks.
"""

from __future__ import annotations

import pytest

from autograder import selfcheck
from notebooks import variant

LAB = "02_restart_recovery"

NO_CHECKPOINT = '''
@ray.remote
class CheckpointedAccumulator:  # state in memory only: a restart brings it back empty
    def __init__(self, path, every):
        self.count, self.total = 0, 0

    def add(self, x):
        self.count += 1
        self.total += x
        return self.count

    def state(self):
        return self.count, self.total
'''

NO_RETRIES = '''
class PipelineWorker:
    def __init__(self, ledger):
        self.ledger = ledger

    def process(self, seq, seed):
        value = faults.tiny_item(seed)
        if not ray.get(self.ledger.applied.remote(seq)):
            ray.get(self.ledger.add.remote(seq, value))
        return value


PipelineWorker = ray.remote(max_restarts=-1)(PipelineWorker)  # max_task_retries left at 0
'''


@pytest.mark.slow
def test_no_retries_and_no_checkpoint_lose_exactly_their_points(tmp_path):
    nb = variant(LAB, tmp_path / f"{LAB}.ipynb", demos=False,
                 replace={"checkpointed_accumulator": NO_CHECKPOINT, "pipeline_worker": NO_RETRIES})
    outcome = selfcheck.grade_notebook(nb, cell_timeout_s=300)
    assert not outcome.error
    failed = {r.name: r.message for r in outcome.results if not r.passed}
    assert set(failed) == {"checkpoint-resume", "checkpoint-interval", "chaos-complete"}
    assert outcome.score == 7 and outcome.max_score == 15
    assert "state guarantee broken" in failed["checkpoint-resume"]
    assert "more than one checkpoint interval" in failed["checkpoint-interval"]
    assert "at-most-once" in failed["chaos-complete"] and "completion guarantee broken" in failed["chaos-complete"]
