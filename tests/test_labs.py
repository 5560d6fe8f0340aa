"""Every lab, through real nbgrader: the solution gets full marks, the blank lab gets 0,
labs/ is what nbgrader generates from solutions/ (test cells' points included), and test cells
match registered checks, whose points are those cells' (autograder/checks/points.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from autograder import selfcheck
from autograder.checks import points
from autograder.grader.session.catalog import for_lab
from notebooks import ROOT, graded_cells, released, solution, variant

LABS = selfcheck.labs()
# 00_measure's solution and blank copy are graded in its cohort test (tests/test_grading_lab00.py);
# grading them again here would only spend CI time.
THROUGH_NBGRADER = [lab for lab in LABS if lab != "00_measure"]
# Every lab's solution is graded in CI as students are graded (sandboxed): full marks there is
# the proof that its timed comparisons are fair (issue 45), and the reference half of the calibrate
# gate (tests/test_calibrate.py). Lab 00's is graded in its cohort (tests/test_grading_lab00.py).
SOLUTIONS_IN_CI = THROUGH_NBGRADER


def test_every_lab_has_both_copies():
    assert "00_measure" in LABS
    for lab in LABS:
        assert released(lab).exists(), f"labs/{lab} missing: run nbgrader generate_assignment {lab}"


@pytest.mark.parametrize("lab", LABS)
def test_test_cells_match_registered_checks(lab):
    """One test cell per registered check, and no other; each check's points are its cell's,
    read from the source notebook in the kit (the one place points are written)."""
    cells = graded_cells(solution(lab))
    assert points.notebook(lab) == solution(lab)
    assert {c.grade_id: c.points for c in for_lab(lab).values()} == cells


def test_points_come_from_the_notebook_this_install_has(tmp_path, monkeypatch):
    """Without solutions/ (a student bundle) the learner's copy in labs/ gives them; without
    either (a wheel installed without the repository) the copy setup.py puts in the package."""
    lab = "00_measure"
    want = graded_cells(solution(lab))
    kit, packaged = tmp_path / "kit", tmp_path / "notebooks"
    (kit / "labs" / lab).mkdir(parents=True)
    shutil.copy(released(lab), kit / "labs" / lab)
    monkeypatch.setattr(points, "KIT_ROOT", kit)
    monkeypatch.setattr(points, "PACKAGED", packaged)
    points.of.cache_clear()
    try:
        assert points.notebook(lab) == kit / "labs" / lab / f"{lab}.ipynb" and points.of(lab) == want
        packaged.mkdir()
        shutil.move(kit / "labs" / lab / f"{lab}.ipynb", packaged / f"{lab}.ipynb")
        points.of.cache_clear()
        assert points.notebook(lab) == packaged / f"{lab}.ipynb" and points.of(lab) == want
        (packaged / f"{lab}.ipynb").unlink()
        points.of.cache_clear()
        with pytest.raises(LookupError, match="no notebook of 00_measure"):
            points.of(lab)
    finally:
        points.of.cache_clear()


def test_a_check_without_a_test_cell_says_so():
    from autograder.checks import Check

    with pytest.raises(LookupError, match="no test cell test-no-such-check"):
        Check("00_measure", "no-such-check", print).points


@pytest.mark.parametrize("lab", LABS)
def test_the_setup_cells_are_locked_and_the_second_begins_grading(lab):
    nb = json.loads(solution(lab).read_text())
    install, first = [c for c in nb["cells"] if c["cell_type"] == "code"][:2]
    assert install["metadata"]["nbgrader"]["locked"] and first["metadata"]["nbgrader"]["locked"]
    assert f'autograder.begin("{lab}")' in "".join(first["source"])


def _cells(path):
    nb = json.loads(path.read_text())
    return [(c["cell_type"], "".join(c["source"])) for c in nb["cells"]]


def test_labs_are_generated_from_solutions(tmp_path):
    kit = tmp_path / "kit"
    shutil.copytree(ROOT / "solutions", kit / "solutions")
    shutil.copy(ROOT / "nbgrader_config.py", kit)
    for lab in LABS:
        subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", lab, "--force"],
                       cwd=kit, check=True, capture_output=True)
        generated = kit / "labs" / lab / f"{lab}.ipynb"
        assert _cells(generated) == _cells(released(lab)), (
            f"labs/{lab} is stale: run `nbgrader generate_assignment {lab} --force` and commit labs/")
        # a bundle reads each check's points from labs/ (autograder/checks/points.py)
        assert graded_cells(generated) == graded_cells(released(lab)) == graded_cells(solution(lab)), (
            f"labs/{lab}'s test cells' points are stale: run `nbgrader generate_assignment {lab} --force`")


@pytest.mark.slow
@pytest.mark.grading
@pytest.mark.parametrize("lab", SOLUTIONS_IN_CI)
def test_solution_gets_full_marks(lab):
    notebook = solution(lab)
    outcome = selfcheck.grade_notebook(notebook, lab, cell_timeout_s=300)
    assert not outcome.error
    failed = {r.name: r.message for r in outcome.results if not r.passed}
    assert not outcome.killed, outcome.killed
    assert not outcome.cell_errors, outcome.cell_errors  # the lesson's demonstrations run as written
    assert not failed and outcome.score == outcome.max_score == sum(graded_cells(solution(lab)).values())


@pytest.mark.slow
@pytest.mark.grading
@pytest.mark.parametrize("lab", THROUGH_NBGRADER)
def test_blank_lab_gets_zero(lab, tmp_path):
    # the learner's copy without its demonstration cells: they earn nothing either way, and
    # given code in them (e.g. lab 04's naive job) would only spend CI time
    blank = variant(lab, tmp_path / f"{lab}.ipynb", base=released(lab), demos=False)
    outcome = selfcheck.grade_notebook(blank, lab, cell_timeout_s=300)
    assert not outcome.error
    assert outcome.results and outcome.score == 0, [r for r in outcome.results if r.score]
