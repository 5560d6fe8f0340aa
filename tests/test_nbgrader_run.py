"""The nbgrader glue: what a failed run reports, the grader's verdicts over the kernel's, and
the kit's tools found without an activated environment."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.grader.nbgrading import nbgrader_run
from autograder.report import Result
from notebooks import ROOT, released, variant

ALEMBIC_LOG = """[GenerateAssignmentApp | INFO] Copying source/00_measure/00_measure.ipynb
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/nbgrader/api.py", line 37, in get_alembic_version
    output = sp.check_output(['alembic', '-c', alembic_ini, 'heads'])
FileNotFoundError: [Errno 2] No such file or directory: 'alembic'
[GenerateAssignmentApp | ERROR] There was an error processing assignment: 00_measure
[GenerateAssignmentApp | ERROR] Please see the the above traceback for details
"""


def test_the_cause_is_the_traceback_not_the_banner():
    assert nbgrader_run.cause(ALEMBIC_LOG) == "FileNotFoundError: [Errno 2] No such file or directory: 'alembic'"
    assert nbgrader_run.cause("[AutogradeApp | ERROR] Notebook JSON is invalid\n") == \
        "[AutogradeApp | ERROR] Notebook JSON is invalid"
    assert nbgrader_run.cause("") == "no output"


def test_ungraded_cells_that_raised_are_named_graded_ones_are_not(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    ray_error = ("\x1b[36mray::ImageWorker.process()\x1b[39m (pid=24847, ip=192.0.2.2)\n  File \"<cell>\", line 3\n"
                 "RuntimeError: ImageWorker.process ran past 60 s and was stopped by the grader")
    nb.cells = [nbformat.v4.new_code_cell("x = 1"),
                nbformat.v4.new_code_cell("\nrate = throughput(fn, 8)  # a demonstration"),
                nbformat.v4.new_code_cell("ray.get(worker.process.remote(batch))"),
                nbformat.v4.new_code_cell("grade('a')", metadata={"nbgrader": {"grade": True, "grade_id": "test-a"}}),
                nbformat.v4.new_markdown_cell("prose")]
    nb.cells[1].outputs = [nbformat.v4.new_output("error", ename="NameError", evalue="name 'throughput' is not defined")]
    nb.cells[2].outputs = [nbformat.v4.new_output("error", ename="RayTaskError(RuntimeError)", evalue=ray_error)]
    nb.cells[3].outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue="too slow")]
    nbformat.write(nb, tmp_path / "lab.ipynb")
    assert nbgrader_run.cell_errors(tmp_path) == [
        "code cell 2 (`rate = throughput(fn, 8)  # a demonstration`): NameError: name 'throughput' is not defined",
        "code cell 3 (`ray.get(worker.process.remote(batch))`): RayTaskError(RuntimeError): "
        "RuntimeError: ImageWorker.process ran past 60 s and was stopped by the grader"]


def test_the_grader_reports_exactly_its_checks_and_flags_over_claims():
    kernel = [Result("a", 2, 2), Result("b", 1, 1), Result("bonus", 20, 20)]  # bonus: a row the kernel added
    grader = [Result("a", 2, 2), Result("b", 0, 1, "not confirmed"), Result("c", 0, 2, "did not run")]
    merged, flags = nbgrader_run.merge(kernel, grader)
    assert merged == grader and flags == ["b"]


def test_tools_come_from_this_interpreter_first():
    assert nbgrader_run.tool_env()["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)


def test_a_hidden_cell_waits_for_the_grader_under_the_submission_limit(monkeypatch):
    import nbformat

    monkeypatch.setenv("AUTOGRADER_CELL_TIMEOUT_S", "45")
    monkeypatch.setenv("AUTOGRADER_SUBMISSION_TIMEOUT_S", "900")
    nb = nbformat.read(released("04_data_affinity"), as_version=4)
    limits = {c.metadata.get("nbgrader", {}).get("grade_id", "demo"): nbgrader_run.cell_timeout(c)
              for c in nb.cells if c.cell_type == "code"}
    assert limits["test-pinned-correct"] == 900 and limits["setup"] == 45 and limits["pinned_job"] == 45
    # the config file nbgrader is given sets exactly that function
    config = {}
    exec(nbgrader_run.GRADING_CONFIG.read_text(), {"get_config": lambda: config.setdefault("c", _Config())})
    assert config["c"].Execute.timeout_func is nbgrader_run.cell_timeout


def test_nbgrader_loads_the_grading_config(tmp_path):
    """The flag autograde passes really makes nbgrader read autograder/grader/nbgrading/grading_config.py."""
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "nothing", "--student", "s",
                           nbgrader_run.CONFIG_ARG, "--debug"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert f"Loaded config file: {nbgrader_run.GRADING_CONFIG}" in proc.stdout + proc.stderr


class _Config(dict):
    def __getattr__(self, name):
        return self.setdefault(name, _Config())


def test_a_fixed_seed_is_per_student(monkeypatch):
    monkeypatch.setenv("AUTOGRADER_SEED", "7")
    a, b = nbgrader_run._seed_env("alice"), nbgrader_run._seed_env("bob")
    assert a != b and a == nbgrader_run._seed_env("alice")
    monkeypatch.delenv("AUTOGRADER_SEED")
    assert nbgrader_run._seed_env("alice") == {}


@pytest.mark.slow
@pytest.mark.grading
def test_check_runs_through_the_interpreter_without_its_bin_on_path(tmp_path):
    """An IDE or cron job runs /path/to/venv/bin/python directly: nbgrader must still find alembic."""
    blank = variant("00_measure", tmp_path / "00_measure.ipynb", base=released("00_measure"), demos=False)
    bindir = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != bindir)
    proc = subprocess.run([sys.executable, "-m", "autograder", "check", str(blank), "--json"],
                          env={**os.environ, "PATH": path or "/usr/bin:/bin"}, capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["error"] == "", proc.stderr[-2000:]
    assert report["score"] == 0 and report["max_score"] == 14  # the blank lab 00 earns nothing
    assert report["score"] == 0 and report["max_score"] == 14


def test_processes_a_submission_leaves_are_ended(tmp_path):
    """A detached daemon (new session, parent gone) is found through the subreaper and killed."""
    from autograder.grader.isolation.processes import Leftovers, descendants

    leftovers = Leftovers()
    if not leftovers.enabled:
        pytest.skip("no PR_SET_CHILD_SUBREAPER here")
    subprocess.run([sys.executable, "-c", "import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
                    "'import time; time.sleep(600)'], start_new_session=True)"], check=True)
    assert descendants(skip=leftovers.before)  # adopted by this process, not by init
    killed = leftovers.end()
    assert len(killed) == 1 and "time.sleep(600)" in killed[0]
    assert not descendants(skip=leftovers.before)


def test_files_the_kernel_left_named_ipynb_are_not_read_as_notebooks(tmp_path):
    """The kernel runs in the autograded folder: a broken ``*.ipynb`` there (or a folder or a
    link so named) must not stop the grader reading nbgrader's own notebook."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1/0")])
    nb.cells[0].outputs = [nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue="division by zero")]
    nbformat.write(nb, tmp_path / "lab.ipynb")
    (tmp_path / "0.ipynb").write_text("{")
    (tmp_path / "1.ipynb").write_text('{"cells": [1, 2]}')
    (tmp_path / "2.ipynb").mkdir()
    (tmp_path / "3.ipynb").symlink_to("/dev/zero")
    assert nbgrader_run.cell_errors(tmp_path) == ["code cell 1 (`1/0`): ZeroDivisionError: division by zero"]
    assert nbgrader_run._messages(tmp_path) == {}


def test_a_submission_counts_as_answered_once_one_answer_cell_differs_from_the_release(tmp_path):
    """Whether the grader starts a lab's reference ahead (Session.start's ``ahead``): not for an
    untouched blank, which never reaches the reference; for anything else, and where it cannot
    tell. It decides only what starts when, never a score."""
    lab = "01_actor_scaling"
    course = tmp_path / "course"
    (course / "labs" / lab).mkdir(parents=True)
    shutil.copy(released(lab), course / "labs" / lab)
    submitted = course / "submitted" / "s" / lab
    submitted.mkdir(parents=True)

    def submit(path: Path) -> bool:
        shutil.copy(path, submitted / f"{lab}.ipynb")
        return nbgrader_run.answered(course, lab, "s")

    assert not submit(released(lab))
    assert submit(variant(lab, tmp_path / "one.ipynb", base=released(lab),
                          replace={"model": "def fit_overhead(n, r):\n    return 0.001\n"}))
    assert submit(ROOT / "solutions" / lab / f"{lab}.ipynb")
    (course / "labs" / lab / f"{lab}.ipynb").unlink()
    assert submit(released(lab))  # no release to compare with: assume it has answers
