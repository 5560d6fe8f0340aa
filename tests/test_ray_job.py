"""The reference process's Ray job: its workers are made non-dumpable only where learner jobs
join its Ray (autograder/grader/isolation/ray_job.py). Elsewhere the hook's runtime environment only costs:
every worker lease then calls Ray's runtime-env agent, and lab 03's placement-group tasks ran at
0.6x of no quota with it, 1.0x without (docs/security/sandbox.md#cost)."""

from __future__ import annotations

import ast
import inspect
import os

import pytest

from autograder.grader.isolation import ray_job
from autograder.grader.session import reference_process


@pytest.mark.parametrize("workers", [True, False])
def test_install_sets_the_hook_only_when_asked(monkeypatch, workers):
    monkeypatch.delenv(ray_job.HOOK_VARIABLE, raising=False)
    monkeypatch.setattr(ray_job, "not_dumpable", lambda: None)  # this test process stays as it is
    ray_job.install(workers=workers)
    assert (os.environ.get(ray_job.HOOK_VARIABLE) == f"{ray_job.__name__}.runtime_env") is workers
    assert ray_job.runtime_env({"env_vars": {"A": "1"}}) == {
        "env_vars": {"A": "1"}, "worker_process_setup_hook": f"{ray_job.__name__}.not_dumpable"}


def test_the_reference_process_hooks_exactly_the_rays_learner_jobs_join():
    """Labs 00 and 03: a Ray private to the reference process; 01, 02, 04, 05: the lab's Ray, which
    learner jobs join -- but not the Ray of its own that each lab's reference has there."""
    calls = [n for n in ast.walk(ast.parse(inspect.getsource(reference_process.main)))
             if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "install"]
    assert len(calls) == 1 and ast.unparse(calls[0]) == "ray_job.install(workers=learner_jobs_join(lab, copy))"
    every = ("00_measure", "01_actor_scaling", "02_restart_recovery", "03_quotas", "04_data_affinity", "05_capstone")
    joined = {copy: {lab for lab in every if reference_process.learner_jobs_join(lab, copy)}
              for copy in ("reference", "instruments")}
    assert joined["instruments"] == {"01_actor_scaling", "02_restart_recovery", "04_data_affinity", "05_capstone"}
    assert joined["reference"] == set()
