"""The instructor's seed stays out of every process learner code can read."""

from __future__ import annotations

import os
import subprocess
import sys

from autograder import seed

from autograder.grader.nbgrading import nbgrader_run


def test_the_command_runs_again_without_the_seed_in_its_environment_block(tmp_path):
    """/proc/<pid>/environ keeps the environment a process started with: a kernel of the same
    user could read the seed there. After hide() the process is the same command, re-run."""
    script = tmp_path / "grader.py"
    script.write_text("import sys\nfrom autograder import seed\nseed.hide()\n"
                      "print('AUTOGRADER_SEED=' in open('/proc/self/environ').read(), seed.base(), sys.argv[1:])\n")
    env = {**os.environ, "AUTOGRADER_SEED": "4242", "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, str(script), "grade", "."], env=env, capture_output=True, text=True,
                         check=True, timeout=60).stdout.strip().split(maxsplit=2)
    assert out == ["False", "4242", "['grade', '.']"]


def test_no_process_the_grader_starts_is_given_the_seed(monkeypatch):
    monkeypatch.setenv("AUTOGRADER_SEED", "7")
    assert seed.base() == "7"
    assert "AUTOGRADER_SEED" not in nbgrader_run.tool_env({"X": "1"})  # nbgrader, and so the kernel
    assert "AUTOGRADER_SEED" not in seed.without(dict(os.environ))      # the reference process
