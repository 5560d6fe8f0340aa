"""The kit's code in the learner's kernel: strict conversion of learner values, and deadlines
on the learner's functions so that a hang costs one deadline, not one per cell."""

from __future__ import annotations

import time

import pytest

from autograder.kernel import agent, harness


def test_agent_converts_learner_values_strictly():
    assert agent.convert(7, "integer") == 7 and agent.convert(8.0, "integer") == 8
    for value, kind in [(True, "number"), (7.5, "integer"), ("x", "number")]:
        with pytest.raises((ValueError, TypeError)):
            agent.convert(value, kind)
    reply = agent.execute({"name": "f", "returns": "number"}, None, {"f": lambda: "fast"})
    assert reply["op"] == "error" and "expected a number" in reply["message"]
    assert "not defined yet" in agent.execute({"name": "g"}, None, {})["message"]


def test_a_batch_run_spec_is_the_image_kernel_built_on_the_learners_side():
    """The learner's batch sweep times the kernel in its own process: a callback's round trip
    to the grader per call made small batches look slow there (lab 00's batch tiers)."""
    from course import kernels

    seen = {}

    def best_batch_size(run, candidates):
        seen["run"] = run
        return run(candidates[-1]) or candidates[-1]

    spec = {"batch_run": 41, "sizes": [1, 4]}
    reply = agent.execute({"name": "best_batch_size", "args": [spec, [1, 4]], "returns": "integer"},
                          None, {"best_batch_size": best_batch_size})
    assert reply == {"op": "result", "value": 4} and isinstance(seen["run"], kernels.BatchRun)
    assert sorted(seen["run"].batches) == [1, 4]
    with pytest.raises(ValueError, match="one of the candidates"):
        seen["run"](16)


def test_guarded_functions_stop_once_and_then_fail_at_once():
    def spin():
        while True:
            time.sleep(0.01)

    namespace = {"spin": spin, "ok": lambda x: x + 1, "n": 3}
    agent.guard(namespace, ("spin", "ok", "n", "missing"), 0.3)
    assert namespace["ok"](1) == 2 and namespace["n"] == 3
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="ran past 0.3 s"):
        namespace["spin"]()          # a demonstration cell calling it
    assert time.perf_counter() - start < 2
    with pytest.raises(RuntimeError, match="not run again"):
        namespace["spin"]()          # every later cell: at once
    agent.guard(namespace, ("spin",), 0.3)  # the stub is not wrapped again
    with pytest.raises(RuntimeError, match="not run again"):
        namespace["spin"]()


def test_inside_a_grader_request_the_request_deadline_governs():
    namespace = {}

    def slow():
        time.sleep(0.6)
        return 1.0

    namespace["slow"] = slow
    agent.guard(namespace, ("slow",), 0.2)  # shorter than the request's: not used inside it
    reply = agent.execute({"name": "slow", "returns": "number", "timeout_s": 5}, None, namespace)
    assert reply == {"op": "result", "value": 1.0}
    assert not harness.armed()


def _spinner_class():
    class Spinner:
        def __init__(self):
            self.calls = 0

        def spin(self):
            while True:
                pass

        def ok(self):
            self.calls += 1
            return self.calls

    return Spinner


def test_a_hanging_method_of_a_learner_class_is_stopped_once_then_fails_at_once(tmp_path):
    Spinner = _spinner_class()
    agent.guard({"Spinner": Spinner}, ("Spinner",), 0.3, markers=str(tmp_path))
    s = Spinner()
    assert s.ok() == 1
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match=r"Spinner.spin ran past 0.3 s"):
        s.spin()                       # a demonstration cell
    assert time.perf_counter() - start < 2
    with pytest.raises(RuntimeError, match="not run again"):
        Spinner().spin()               # a later cell, another instance: at once
    assert s.ok() == 2                 # the methods that work keep working
    Fixed = _spinner_class()           # the learner fixes the class and runs its cell again
    Fixed.spin = lambda self: "fixed"
    agent.guard({"Spinner": Fixed}, ("Spinner",), 0.3, markers=str(tmp_path))
    assert Fixed().spin() == "fixed"
    agent.guard({"Spinner": Spinner}, ("Spinner",), 0.3, markers=str(tmp_path))  # not wrapped twice
    assert not hasattr(Spinner.__dict__["spin"].__wrapped__, "__wrapped__")


def test_a_hanging_actor_method_is_stopped_inside_the_actor_for_every_actor(ray_local, tmp_path):
    import ray

    Plain, Decorated = _spinner_class(), ray.remote(_spinner_class())  # made a remote class in its own cell
    agent.guard({"Plain": Plain, "Decorated": Decorated}, ("Plain", "Decorated"), 1.0, markers=str(tmp_path))
    for make, name in ((ray.remote(Plain).remote, "Plain"), (Decorated.remote, "Decorated")):
        actor = make()
        assert ray.get(actor.ok.remote()) == 1
        start = time.perf_counter()
        with pytest.raises(ray.exceptions.RayTaskError, match=f"{name}.spin ran past 1 s"):
            ray.get(actor.spin.remote(), timeout=60)
        assert time.perf_counter() - start < 15   # the actor stopped spinning: it answers again
        assert ray.get(actor.ok.remote(), timeout=10) == 2
        with pytest.raises(ray.exceptions.RayTaskError, match="not run again"):
            ray.get(make().spin.remote(), timeout=10)  # a new actor of the class fails at once
        ray.kill(actor)
