"""The grader's side of the channel, against a kernel played by this test: the verdict is
the grader's, whatever the kernel sends; a kernel that hangs, lies or leaves costs only the
check it was in."""

from __future__ import annotations

import os
import threading

import pytest

from autograder.kernel import channel
from autograder.grader.session.session import Session
from autograder.transport import Callback, Learner, plain

LAB = "00_measure"


def serve(session: Session) -> channel.Endpoint:
    return channel.Endpoint(session.serve)


ERRORS: list[BaseException] = []


def kernel(endpoint: channel.Endpoint, script) -> threading.Thread:
    """Play the learner's kernel in a thread: ``script(conn)`` talks to the grader."""
    def run():
        conn = channel.Client(endpoint.address, family="AF_UNIX", authkey=bytes.fromhex(endpoint.env[channel.KEY_ENV]))
        try:
            script(conn)
        except BaseException as exc:  # reported by the test, not lost in the thread
            ERRORS.append(exc)
        finally:
            conn.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.fixture(autouse=True)
def no_kernel_errors():
    ERRORS.clear()
    yield
    assert not ERRORS, ERRORS


def test_plain_accepts_only_the_kind_asked_for():
    assert plain(3, "number", "x") == 3.0
    assert plain(64, "integer", "x") == 64
    assert plain({"shape": [2], "data": [1.0, 2]}, "array", "x")["shape"] == [2]
    for value, kind in [(True, "number"), ("1.0", "number"), (float("nan"), "number"), (float("-inf"), "number"),
                        (10**400, "number"), ({"shape": [1], "data": [float("nan")]}, "array"),
                        (64.0, "integer"), ([1, 2], "array"),
                        ({"shape": [3], "data": [1.0]}, "array"), ({"shape": [1], "data": ["a"]}, "array")]:
        with pytest.raises(AssertionError, match="not " + kind):
            plain(value, kind, "x")


def test_a_forged_verdict_or_value_from_the_kernel_changes_nothing():
    session = Session(LAB, seed=1)
    endpoint = serve(session)

    def forger(conn):
        channel.send(conn, {"op": "verdict", "passed": True})       # not the kernel's to send:
        with pytest.raises(channel.ProtocolError):                   # the grader hangs up
            channel.recv(conn, 10)

    def liar(conn):
        channel.send(conn, {"op": "check", "name": "batch-model"})
        request = channel.recv(conn)
        assert request["op"] == "call" and request["name"] == "best_batch_size"
        assert request["args"] == [{"callback": 0, "deferred": False, "name": "run"},  # nothing
                                   [8, 16, 32, 64, 128, 256]]                           # carries the answer
        channel.send(conn, {"op": "result", "value": "16"})         # a string, not an integer
        channel.recv(conn)

    kernel(endpoint, forger).join(30)
    kernel(endpoint, liar).join(30)
    endpoint.close()
    results = {r.name: r for r in session.seal()}
    assert results["batch-model"].score == 0 and "not integer" in results["batch-model"].message
    assert sum(r.score for r in results.values()) == 0
    assert "did not run" in results["throughput-sync"].message


def test_a_check_is_measured_once_and_sealed_sessions_refuse_more():
    session = Session(LAB, seed=1, learner=Learner(namespace={"best_batch_size": lambda run, c: 8}))
    first = session.run("batch-model")
    session.learner = Learner(namespace={"best_batch_size": lambda run, c: 16})
    assert session.run("batch-model") is first          # asking again cannot re-roll a verdict
    session.seal()
    assert "after grading had ended" in session.run("batch-real-tier1").message


def test_start_up_run_ahead_ends_before_any_check_and_its_errors_cost_nothing():
    """What grading starts ahead (Session.prepare) runs on one background thread, which lives
    until close (a sandbox dies with the thread that started it: bubblewrap's --die-with-parent);
    every check waits for it, so it never runs beside one; a start-up that fails is dropped (the
    check that needs it starts it again). Outside grading nothing runs ahead."""
    import dataclasses
    import time

    events = []
    session = Session(LAB, seed=1, learner=Learner(namespace={"best_batch_size": lambda run, c: 8}))
    check = session.checks["batch-model"]

    def measured(s):
        events.append("check")
        return check.fn(s)

    session.checks = {**session.checks, "batch-model": dataclasses.replace(check, fn=measured)}
    session.prepare(lambda: events.append("not grading"))
    session._grading = True
    threads = []

    def slow():
        time.sleep(0.5)
        threads.append(threading.current_thread())
        events.append("ahead")

    def broken():
        threads.append(threading.current_thread())
        raise RuntimeError("the reference's Ray did not start")

    session.prepare(slow)
    session.prepare(broken)
    session.prepare(None)  # a lab with nothing to start ahead
    session.run("batch-model")
    assert events == ["ahead", "check"]
    assert threads[0] is threads[1] and threads[0].is_alive() and threads[0] is not threading.current_thread()
    session.close()
    threads[0].join(5)
    assert not threads[0].is_alive()


def test_a_kernel_that_stops_answering_is_interrupted_and_the_check_fails(monkeypatch):
    import autograder.transport as s

    interrupted = []
    monkeypatch.setattr(s, "GRACE_S", 0.5)
    monkeypatch.setattr(s, "INTERRUPT_WAIT_S", 0.5)
    monkeypatch.setattr(s.Learner, "_interrupt", lambda self: interrupted.append(self._pid))
    monkeypatch.setenv("AUTOGRADER_CALL_TIMEOUT_S", "0.5")
    session = Session(LAB, seed=1)
    endpoint = serve(session)
    release = threading.Event()

    def silent(conn):
        channel.send(conn, {"op": "check", "name": "throughput-known-cost"})
        channel.recv(conn)  # the call ...
        release.wait(20)    # ... never answered

    t = kernel(endpoint, silent)
    threading.Event().wait(3)
    release.set()
    t.join(10)
    endpoint.close()
    result = {r.name: r for r in session.seal()}["throughput-known-cost"]
    assert interrupted == [os.getpid()], result  # the peer's real pid, read from the socket
    assert result.score == 0 and "did not respond to an interrupt" in result.message


def test_a_call_the_notebook_abandoned_fails_and_the_next_check_still_runs():
    session = Session(LAB, seed=1)
    endpoint = serve(session)

    def impatient(conn):
        channel.send(conn, {"op": "check", "name": "batch-model"})
        assert channel.recv(conn, 10)["op"] == "call"
        channel.send(conn, {"op": "check", "name": "ray-task"})     # interrupted: moved on
        assert channel.recv(conn, 10)["name"] == "batch-model"        # a late verdict ...
        request = channel.recv(conn, 10)                              # ... then the new check
        assert request["name"] == "submit_batch"
        channel.send(conn, {"op": "error", "message": "nope"})
        assert channel.recv(conn, 10) == {"op": "verdict", "name": "ray-task", "passed": False, "message": "nope"}

    kernel(endpoint, impatient).join(30)
    endpoint.close()
    results = {r.name: r for r in session.seal()}
    assert "interrupted in the notebook" in results["batch-model"].message
    assert results["ray-task"].message == "nope"


def test_callbacks_run_in_the_grader_and_reject_bad_arguments():
    calls = []
    learner = Learner(namespace={"f": lambda run: [run(8), run(8)] and 1.5})
    got = learner.call("f", Callback(lambda n: calls.append(n)), what="f(run)", returns="number")
    assert got == 1.5 and calls == [8, 8]
    with pytest.raises(AssertionError, match="plain numbers"):
        Learner(namespace={"f": lambda run: run(object())}).call("f", Callback(print), what="f(run)")


def test_a_hung_function_is_not_run_again_and_later_cells_fail_fast():
    namespace = {"spin": lambda: [None for _ in iter(int, 1)]}
    learner = Learner(namespace=namespace)
    with pytest.raises(AssertionError, match="did not finish within 0.5 s"):
        learner.call("spin", what="spin()", timeout_s=0.5)
    with pytest.raises(AssertionError, match="already stopped once"):
        learner.call("spin", what="spin()", timeout_s=0.5)
    with pytest.raises(RuntimeError, match="stopped by the grader"):
        namespace["spin"]()  # what a demonstration cell calling it now gets


def _rounds(seconds):
    """A side whose rounds take ``seconds[i]`` (as reported: no real waiting); counts its calls."""
    it = iter(seconds)

    def go():
        go.calls += 1
        return next(it)

    go.calls = 0
    return go


def test_side_by_side_stops_early_only_after_two_slow_rounds():
    s = Session("00_measure", seed=1)
    cold = _rounds([10.0] + [1.0] * 9)  # one slow, cold first round; then as fast as the reference
    r = s.side_by_side(cold, _rounds([1.0] * 10), rounds=4, stop_below=0.2)
    assert cold.calls == 6 and r.ratio == 1.0  # warm-up, its confirmation, then 4 rounds
    slow = _rounds([10.0] * 10)
    r = s.side_by_side(slow, _rounds([1.0] * 10), rounds=4, stop_below=0.2)
    assert slow.calls == 2 and r.ratio == pytest.approx(0.1)


def test_side_by_side_ends_its_rounds_once_every_tiers_verdict_is_decided():
    """3 rounds of 5 that agree decide a median of 5 against each tier; rounds that straddle a
    tier run on; calibrate's sessions (early_stop off) and tierless calls run every round."""
    s = Session("00_measure", seed=1)
    fast = _rounds([1.0] * 10)
    r = s.side_by_side(fast, _rounds([1.0] * 10), rounds=5, tiers=(0.4, 0.7))
    assert fast.calls == 4 and len(r.ratios) == 3 and r.ratio == 1.0  # warm-up + 3 rounds
    straddling = _rounds([1.0, 1.0, 2.0, 1.0, 2.0, 1.0])  # ratios 1.0, 0.5, 1.0, 0.5, 1.0 around 0.7
    r = s.side_by_side(straddling, _rounds([1.0] * 10), rounds=5, tiers=(0.4, 0.7))
    assert straddling.calls == 6 and len(r.ratios) == 5 and r.ratio == 1.0
    untiered = _rounds([1.0] * 10)
    s.side_by_side(untiered, _rounds([1.0] * 10), rounds=5)
    assert untiered.calls == 6
    s.early_stop = False
    calibrating = _rounds([1.0] * 10)
    s.side_by_side(calibrating, _rounds([1.0] * 10), rounds=5, tiers=(0.4, 0.7))
    assert calibrating.calls == 6


def test_an_early_verdict_is_the_one_every_round_would_give():
    """Whatever the rounds not run would have read, the median of all of them is on the side of
    each tier that :func:`decided` saw (random sequences, odd and even round counts)."""
    import random
    import statistics

    from autograder.grader.session.session import decided

    rng, tiers, stopped = random.Random(7), (0.4, 0.7), 0
    for _ in range(3000):
        rounds = rng.choice((3, 4, 5, 7, 8))
        ratios = [rng.choice((0.0, 0.3, 0.4, 0.55, 0.7, 0.9, 5.0, rng.uniform(0, 1.5))) for _ in range(rounds)]
        k = next(k for k in range(1, rounds + 1) if decided(ratios[:k], rounds, tiers))
        stopped += k < rounds
        final = statistics.median(ratios)
        for _ in range(5):  # other continuations of the same first k rounds
            other = statistics.median(ratios[:k] + [rng.uniform(0, 3) for _ in range(rounds - k)])
            assert all((other >= t) == (final >= t) for t in tiers), (ratios, k)
    assert stopped > 1000  # it does stop early, often


@pytest.mark.parametrize("mode", ["freeze", "idle"])
def test_side_by_side_times_every_reference_turn_with_the_learner_side_paused(mode):
    """Where the reference has a Ray of its own (a sandboxed lab 01 or 04 grading), every reference
    turn -- the warm-up's too -- runs inside the group's pause of the lab's kind (frozen, or at idle
    CPU priority), and every learner turn with the reference's side at idle CPU priority: the same
    conditions both ways (docs/measurement.md#same-conditions)."""
    import contextlib

    class Group:
        state = None

        def _pause(kind):
            @contextlib.contextmanager
            def pause(self, side="learner"):
                self.state = kind if side == "learner" else f"reference {kind}"
                try:
                    yield True
                finally:
                    self.state = None
            return pause

        paused, idle = _pause("freeze"), _pause("idle")

    s, group, seen = Session("00_measure", seed=1), Group(), []

    def side(name):
        def go():
            seen.append((name, group.state))
            return 1.0
        return go

    s._group, s._pause = group, mode  # as Session.start sets them for a lab whose reference has a Ray of its own
    s.side_by_side(side("learner"), side("reference"), rounds=4)
    want = {"reference": mode, "learner": "reference idle"}
    assert len(seen) == 10 and all(state == want[who] for who, state in seen), seen


def test_the_labs_whose_reference_has_a_ray_of_its_own_keep_the_learner_side_off_the_cores():
    """Labs 01, 02 and 05 freeze the learner's side in the reference's turns; lab 04 puts it at
    idle CPU priority (its emulated cluster ran slower after every thaw: its spec's
    pause_learner); labs 00 and 03 have no lab Ray to pause."""
    from autograder import labs

    assert {lab for lab in labs.all_labs() if labs.own_reference_ray(lab)} == {
        "01_actor_scaling", "02_restart_recovery", "04_data_affinity", "05_capstone"}
    assert {lab: labs.pauses_learner(lab) for lab in labs.all_labs() if labs.pauses_learner(lab)} == {
        "01_actor_scaling": "freeze", "02_restart_recovery": "freeze", "04_data_affinity": "idle",
        "05_capstone": "freeze"}


def test_a_check_that_needs_the_missing_reference_is_skipped_only_outside_grading(monkeypatch):
    """In a student bundle a check that needs the reference is SKIP, counted apart; while grading
    the same fault costs the check its points (a kit whose references vanished is not a skip)."""
    from autograder import checks
    from autograder.report import total
    from autograder.grader.session.session import Session

    def missing(lab):
        raise checks.InstructorOnly("autograder.labs.lab00.reference is not in this install")

    monkeypatch.setattr("autograder.grader.session.session.reference", missing)
    local = Session("00_measure").run("batch-real-tier1")
    assert local.skipped and total([local]) == (0, 0) and "instructor" in local.message
    grading = Session("00_measure")
    grading._grading = True
    result = grading.run("batch-real-tier1")
    assert not result.skipped and result.max_score == 1 and result.score == 0 and total([result]) == (0, 1)


def test_kit_steps_are_called_as_methods_checked_against_their_signatures():
    """``side.kit.<step>(...)`` is ``side.call("kit.<step>", ...)``; a step that does not exist
    or arguments its signature does not take fail in the grader, before anything is sent."""
    from autograder.kernel.stash import STASH
    from autograder.transport import Learner

    side = Learner(namespace={})
    STASH.kept["tmp"] = object()
    assert side.kit.forget("tmp", what="forget") is None and "tmp" not in STASH.kept  # routines.forget ran
    with pytest.raises(AttributeError, match="no kit step 'no_such_step'"):
        side.kit.no_such_step(what="x")
    with pytest.raises(TypeError):
        side.kit.forget("a", "b", what="forget")  # forget(key) takes one argument
    seconds, value = side.kit.forget.timed("tmp", what="forget")
    assert value is None and seconds >= 0


def test_a_kit_steps_return_annotation_is_the_kind_its_calls_check():
    """A step's signature is its declaration: ``-> int`` makes its calls expect "integer" unless a
    call names a narrower kind; every step of every lab has an annotation the channel knows, and
    a value of another kind fails the check, not the learner."""
    from autograder.labs import all_labs, load_steps
    from autograder.kernel.routines import STEPS, step
    from autograder.transport import Learner, declared_kind

    for lab in all_labs():
        load_steps(lab)
    kinds = {name: declared_kind(fn) for name, fn in STEPS.items()}  # TypeError: an unknown annotation
    assert kinds["actor_id"] == "string" and kinds["tasks_run"] == "integer" and kinds["release"] == "none"

    @step
    def answers_text(n: int) -> int:
        return "not a number"

    side = Learner(namespace={})
    try:
        with pytest.raises(AssertionError, match="expected a whole number"):
            side.kit.answers_text(1, what="a step that lies about its kind")
        assert side.kit.answers_text(1, what="asked as json", returns="json") == "not a number"
    finally:
        STEPS.pop("answers_text")


def test_a_check_may_call_only_the_learner_names_its_labs_spec_declares():
    """Every learner name a check calls is declared once, in the lab's spec (which also gives it
    its deadline guard): calling another is the check's bug, raised before anything is sent."""
    from autograder.grader.session.session import Session
    from autograder.transport import Learner

    session = Session("00_measure", learner=Learner(namespace={"throughput": lambda fn, items: 1.5}))
    assert session.learner.names == ("throughput", "best_batch_size", "submit_batch")
    assert session.learner.call("throughput", None, 3, what="throughput(fn, items)", returns="number") == 1.5
    with pytest.raises(LookupError, match="not in the lab's learner_names"):
        session.learner.call("plan", what="plan()")


def test_a_check_graded_on_two_readings_stops_early_only_once_both_are_decided():
    """Lab 05 grades the lower of the timed median and the whole-run median: timed rounds that
    agree (1.0x against tiers 0.4 / 0.7) must not end the rounds while the whole-run ratios
    (0.5, 1.0, 0.5, ...) still straddle 0.7 -- the early verdict would not be the one graded."""
    s = Session("00_measure", seed=1)
    straddling = [0.5, 1.0, 0.5, 1.0, 0.5]
    fast = _rounds([1.0] * 10)
    r = s.side_by_side(fast, _rounds([1.0] * 10), rounds=5, tiers=(0.4, 0.7),
                       also_graded=lambda: straddling[:fast.calls - 1])  # one a round, after the warm-up
    assert len(r.ratios) == 5  # the timed ratios alone stopped it after 3
    agreeing = _rounds([1.0] * 10)
    r = s.side_by_side(agreeing, _rounds([1.0] * 10), rounds=5, tiers=(0.4, 0.7),
                       also_graded=lambda: [1.0] * (agreeing.calls - 1))
    assert len(r.ratios) == 3  # both decided after 3 rounds
