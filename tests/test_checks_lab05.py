"""Lab 05's checks: the grader's plan scenarios bind where they say, the pipeline's truth is
the stages' own result, and -- through real nbgrader -- a plan that names the wrong limit and
a pipeline without an actor pool lose exactly their points. (The solution's full marks and
the blank lab's 0 are in tests/test_labs.py.)"""

from __future__ import annotations

import pytest

from autograder import selfcheck
from autograder.grader.session.catalog import for_lab
from autograder.labs.lab05 import checks as lab05
from autograder.labs.lab05 import reference as ref
from autograder.grader.session.session import Session
from notebooks import cell_source, only_extended, variant

LAB = "05_capstone"


@pytest.mark.parametrize("seed", range(12))
def test_each_scenario_binds_where_it_says_by_a_margin(seed):
    session = Session(LAB, seed=seed)
    for salt, limit in enumerate(lab05.scenario_limits(session), start=10):
        target, px, m = lab05.scenario(session, salt, limit)
        got = ref.plan(target, px, m)
        assert got["limit"] == limit
        cap = sorted(ref.node_capacity(m, px, got["batch_size"]).values())
        assert cap[1] >= 1.9 * cap[0]  # the runner-up is far behind: no tie for a learner to fall on
        assert 5 <= got["nodes"] <= 250


def test_a_plan_that_always_names_the_gpu_fails_plan_limit_only():
    session = Session(LAB, seed=3)
    wrong = lambda target, px, m: {**ref.plan(target, px, m), "limit": "gpu"}  # noqa: E731
    from autograder.transport import Learner

    session.learner = Learner(namespace={"plan": wrong})
    session._reference = Learner(namespace=vars(ref))
    results = {name: session.run(name) for name in ("plan-limit", "plan-size", "plan-batch")}
    assert not results["plan-limit"].passed and "the grader's model says" in results["plan-limit"].message
    assert results["plan-size"].passed and results["plan-batch"].passed


@pytest.mark.slow
@pytest.mark.grading
@only_extended("lab 05's plan checks fail a wrong plan in-process, above")
def test_wrong_limit_and_no_actor_pool_lose_exactly_their_points(tmp_path):
    plan = cell_source(LAB, "plan").replace('"limit": limit,', '"limit": "gpu",')
    tasks = cell_source(LAB, "build_pipeline").replace(
        "compute=ray.data.ActorPoolStrategy(size=actors), **pipeline.actor_options(actors)",
        "**pipeline.actor_options(actors)").replace(
        ".map_batches(pipeline.Model,", ".map_batches(lambda batch: pipeline.Model()(batch),")
    assert plan != cell_source(LAB, "plan") and tasks != cell_source(LAB, "build_pipeline")
    nb = variant(LAB, tmp_path / f"{LAB}.ipynb", replace={"plan": plan, "build_pipeline": tasks}, demos=False)
    outcome = selfcheck.grade_notebook(nb, LAB, cell_timeout_s=300)
    assert not outcome.error
    failed = {r.name for r in outcome.results if not r.passed}
    assert failed == {"plan-limit", "pipeline-actor-pool", "pipeline-throughput-tier1", "pipeline-throughput-tier2"}, (
        [(r.name, r.message) for r in outcome.results])
    lost = sum(for_lab(LAB)[name].points for name in failed)
    assert outcome.score == outcome.max_score - lost


def test_scenario_limits_cover_every_resource_in_a_drawn_order():
    orders = {tuple(lab05.scenario_limits(Session(LAB, seed=seed))) for seed in range(20)}
    assert all(set(o) == set(lab05.LIMITS) and len(o) == 6 for o in orders)
    assert len(orders) > 10  # a plan cannot answer by call order


def test_the_notebook_reads_its_tiers_from_targets_py_and_restates_none():
    """Issue 52: a tier lab 05 quotes is the one in its targets.py, because the graded cells print
    it from there; no graded cell's comment and no lesson sentence writes a ratio or band itself."""
    import json
    import re

    import test_prose

    from autograder.targets import for_lab

    cells = json.loads(test_prose.CAPSTONE.read_text())["cells"]
    graded = {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"]) for c in cells
              if c["metadata"].get("nbgrader", {}).get("grade")}
    setup = next("".join(c["source"]) for c in cells if c["metadata"].get("nbgrader", {}).get("grade_id") == "setup")
    assert 'TARGETS = autograder.begin("05_capstone")' in setup  # begin returns the lab's targets.py
    reads = {"test-plan-size": "TARGETS.plan_band", "test-pipeline-throughput-tier1": "TARGETS.throughput_tiers[0]",
             "test-pipeline-throughput-tier2": "TARGETS.throughput_tiers[1]"}
    for grade_id, text in graded.items():
        comments = " ".join(line for line in text.splitlines() if line.lstrip().startswith("#"))
        assert not re.search(r"\d\s?(?:×|x\b|%)", comments.replace("(2 points)", "")), (grade_id, comments)
        if grade_id in reads:
            assert reads[grade_id] in text, grade_id
    assert for_lab(LAB).plan_band and len(for_lab(LAB).throughput_tiers) == 2  # the fields the cells print
    lesson = [n for i, s in test_prose.markdown_cells(test_prose.CAPSTONE)
              for sentence, _ in test_prose.sentences(s) for n in test_prose.claims(sentence)]
    assert not [n for n in lesson if n.endswith(("×", "x", "%"))], lesson
