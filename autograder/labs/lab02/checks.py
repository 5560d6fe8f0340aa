"""Checks for 02_restart_recovery: every point here is earned under injected failures.

All grader-side (see :mod:`autograder.checks`). A grader's process starts the lab's Ray and
the learner's kernel joins it (sandboxed, a process of kit steps only: no check here calls a
reference implementation, so the reference's sources never enter that Ray); the grader's own
actors -- a probe and a ledger (:mod:`autograder.labs.lab02.instruments`) -- are closed to
learner code (no ``__ray_call__``),
and the grader finds the process to kill in Ray's own actor table, never by asking where
learner code runs.

* **latency**: the learner's ``recovery_latency(actor, kill)`` gets the grader's probe actor
  and a ``kill`` the grader performs itself (SIGKILL of the worker process, or
  ``ray.kill(..., no_restart=False)``). The probe's new process records, on the machine's
  monotonic clock, when it first answered; the learner's number must lie between that and
  the moment the call returned to the grader (with a small slack).
* **checkpoint**: the grader feeds seeded numbers to the learner's ``CheckpointedAccumulator``
  (interval and path chosen by the grader), SIGKILLs it at seeded item numbers, and checks the
  state it comes back with against the ground truth it keeps: a real checkpoint, consistent,
  at most one interval behind.
* **chaos**: the learner's ``PipelineWorker`` processes >= 1,000 tiny items whose effects go to
  the grader's ledger; the ledger SIGKILLs the worker at seeded items, right after the item's
  effect landed and before the call returned. Every item must complete with the right value
  (none lost: needs retries), and no effect may be applied twice while every returned item's
  effect is in the ledger (exactly-once: needs idempotent, sequence-numbered updates).

Seeds are drawn per run (``AUTOGRADER_SEED`` fixes them).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import TYPE_CHECKING

from course import faults

from ... import clock
from . import LAB
from .targets import TARGETS as T
from ...transport import Callback, named, stashed
from ...checks import register

if TYPE_CHECKING:
    from ...grader.session.session import Session


# --- recovery latency ----------------------------------------------------------------------------

def _one_latency(session: Session, how: str, retries: int) -> str | None:
    """Run the learner's function once against a grader kill; a failure reason, or None."""
    grader = session.ray_of(session.learner)  # the grader's process on the lab's Ray
    blob = session.memo(("probe", retries), lambda: grader.kit.probe(retries, what="starting the grader's probe",
                                                                     timeout_s=T.restart_timeout_s))
    pid = grader.kit.probe_pid(retries, what="the probe's pid", timeout_s=T.restart_timeout_s)
    killed = {}

    def kill():
        if killed:
            raise ValueError("kill() may be called once per measurement")
        try:
            killed["at"] = grader.kit.kill_probe(retries, how, pid, what="the grader's kill",
                                                 timeout_s=T.restart_timeout_s)
        except AssertionError as exc:
            raise ValueError(str(exc)) from None

    got = session.learner.call("recovery_latency", {"handle": blob}, Callback(kill, name="kill"),
                               what="recovery_latency(actor, kill)", returns="number")
    returned = clock.monotonic()
    if not killed:
        return f"recovery_latency never called kill() (after a {how})"
    _, born, first = grader.kit.probe_recovered(retries, pid, what="waiting for the probe to answer again",
                                                timeout_s=T.restart_timeout_s + 5)
    upper = returned - killed["at"]
    if first is None or first > returned:
        return (f"after a {how} (probe with max_task_retries={retries}), recovery_latency returned "
                f"{got:.3f} s before any call was answered by the new process: a reply from the old "
                "process, or an error, is not a recovery (compare ping()'s pid with the one before)")
    truth = first - killed["at"]
    tol = T.latency_clock_tol_s
    allowed = truth + max(T.latency_slack_s, T.latency_slack_frac * truth)
    if got < truth - tol:
        return (f"after a {how} you measured {got:.3f} s, but the replacement process first answered "
                f"{truth:.3f} s after the kill (grader's clock; its constructor ran at "
                f"{born - killed['at']:.3f} s): your number is too low")
    if got > min(upper, allowed) + tol:
        return (f"after a {how} you measured {got:.3f} s, but the replacement first answered "
                f"{truth:.3f} s after the kill and your function returned at {upper:.3f} s; "
                f"allowed up to {min(upper, allowed):.3f} s -- poll more often and stop at the first answer")
    return None


@register(LAB, "latency-sigkill", timed=True)
def latency_sigkill(session):
    """The learner's recovery latency after the grader SIGKILLs the actor's process.

    The probe has ``max_task_retries=0``: calls fail fast while it restarts."""
    reason = _one_latency(session, "sigkill", 0)
    if reason:
        raise AssertionError(reason)


@register(LAB, "latency-raykill", timed=True)
def latency_raykill(session):
    """... and after ``ray.kill(actor, no_restart=False)``, which returns before the old process is gone.

    The probe has ``max_task_retries=-1``: calls wait while it restarts."""
    reason = _one_latency(session, "ray.kill", -1)
    if reason:
        raise AssertionError(reason)


# --- checkpointed state --------------------------------------------------------------------------

def measure_checkpoint(session: Session) -> dict:
    """Feed, kill at seeded items, read the state back, replay from it."""
    rng = session.rng(20)
    every = rng.randint(*T.ckpt_every)
    xs = [rng.randint(1, 1000) for _ in range(T.ckpt_items)]
    kills = sorted(rng.sample([n for n in range(every + 1, T.ckpt_items - 1) if n % every], T.ckpt_kills))
    grader = session.ray_of(session.learner)  # the grader's process on the lab's Ray
    folder = grader.kit.scratch_folder(what="making a checkpoint folder",
                                       timeout_s=T.restart_timeout_s)
    path = os.path.join(folder, f"accumulator-{session.seed}.json")
    what = "CheckpointedAccumulator"
    learner, timeout_s = session.learner, session.call_timeout_s
    learner.kit.start_actor(named(what), what, {"max_restarts": -1, "max_task_retries": 0}, path, every,
                            what=f"{what}.remote(path, every)", keep="accumulator", timeout_s=timeout_s)
    actor_id = learner.kit.actor_id(stashed("accumulator"), what=what, timeout_s=timeout_s)

    def feed(lo, hi):
        learner.kit.calls(stashed("accumulator"), "add", [[x] for x in xs[lo:hi]], what=f"{what}.add", returns="none",
                          timeout_s=timeout_s)

    def state():
        # True: the call waits if the handle still sees a restart
        got = learner.kit.calls(stashed("accumulator"), "state", [[]], True, what=f"{what}.state()",
                                timeout_s=timeout_s)[0]
        if not (isinstance(got, list) and len(got) == 2 and isinstance(got[0], int)
                and isinstance(got[1], (int, float))):
            raise AssertionError(f"{what}.state() returned {str(got)[:60]}; expected (count, total)")
        return got

    events, fed, final = [], 0, None
    try:
        for n in kills:
            feed(fed, n)
            pid = grader.kit.kill_actor(actor_id, what, what=f"killing {what}",
                                        timeout_s=T.restart_timeout_s + 5)
            grader.kit.await_restart(actor_id, pid, what=what,
                                     timeout_s=T.restart_timeout_s + 5)
            count, total = state()
            events.append((n, count, total))
            if not 0 <= count <= n:
                break
            fed = count  # the grader's source is replayable: resend from where the actor resumed
        else:
            feed(fed, len(xs))
            final = state()
    finally:
        learner.kit.release(stashed("accumulator"), what="releasing the actor", timeout_s=timeout_s)
        grader.kit.remove_folder(folder, what="removing the checkpoint folder", timeout_s=T.restart_timeout_s)
    return {"every": every, "xs": xs, "events": events, "final": final, "path": path}


def _checkpoint(session: Session) -> dict:
    return session.memo(measure_checkpoint, lambda: measure_checkpoint(session))


@register(LAB, "checkpoint-resume")
def checkpoint_resume(session):
    """After each SIGKILL the actor resumes from a real, consistent checkpoint; the end state is right."""
    run = _checkpoint(session)
    every, xs = run["every"], run["xs"]
    for n, count, total in run["events"]:
        if not 0 <= count <= n:
            raise AssertionError(f"after a kill at item {n} the actor claims {count} items: it cannot have "
                                 f"more than it was sent (checkpoint every {every})")
        if count == 0:
            raise AssertionError(f"after a SIGKILL at item {n} the actor came back with 0 items: the "
                                 f"constructor re-ran with empty state -- save (count, total) every {every} "
                                 f"items to path and restore it in __init__ (state guarantee broken)")
        if total != sum(xs[:count]):
            raise AssertionError(f"after a kill at item {n} the actor resumed with count {count} but total "
                                 f"{total!r}, not the {sum(xs[:count])} of its first {count} items: the "
                                 "checkpoint is inconsistent")
    if run["final"] != [len(xs), sum(xs)]:
        raise AssertionError(f"after all {len(xs)} items (replayed from each checkpoint) the actor reports "
                             f"{run['final']}; the grader's truth is ({len(xs)}, {sum(xs)})")


@register(LAB, "checkpoint-interval")
def checkpoint_interval(session):
    """Work redone after each kill is at most one checkpoint interval."""
    run = _checkpoint(session)
    every = run["every"]
    for n, count, _ in run["events"]:
        if n - count > every:
            raise AssertionError(f"killed at item {n}, the actor resumed from item {count}: {n - count} "
                                 f"items redone, more than one checkpoint interval ({every}); checkpoint "
                                 "every `every` items")


# --- chaos: exactly-once effects under repeated kills ---------------------------------------------

def measure_chaos(session: Session):
    """Send item ``seq`` for every seq, in chunks that each end with one armed kill: before each
    chunk the grader arms its ledger with the worker's current pid (from Ray's records)."""
    rng = session.rng(30)
    n = T.chaos_items
    seeds = [rng.randrange(2**31) for _ in range(n)]
    kill_at = faults.kill_points(n, T.chaos_kill_every, rng)
    grader, learner, what = session.ray_of(session.learner), session.learner, "PipelineWorker"
    blob = grader.kit.ledger(what="starting the grader's ledger", timeout_s=T.restart_timeout_s)
    learner.kit.start_actor(named(what), what, {}, {"handle": blob}, what=f"{what}.remote(ledger)",
                            keep="worker")
    actor_id = learner.kit.actor_id(stashed("worker"), what=what)
    t0 = clock.perf_counter()
    bounds = [0] + [k + 1 for k in kill_at] + [n]
    results, lost = {}, {}
    try:
        for lo, hi, k in zip(bounds[:-1], bounds[1:], kill_at + [None]):
            left = T.chaos_timeout_s - (clock.perf_counter() - t0)
            if left <= 0:
                lost.update({seq: f"not sent: the run passed {T.chaos_timeout_s:g} s" for seq in range(lo, n)})
                break
            if k is not None:
                try:
                    grader.kit.arm_ledger(k, actor_id, what, what="arming the ledger", timeout_s=T.restart_timeout_s + 5)
                except AssertionError as exc:
                    lost.update({seq: f"not restarted: {exc}" for seq in range(lo, n)})
                    break
            out = learner.kit.chaos_items(stashed("worker"), [[seq, seeds[seq]] for seq in range(lo, hi)],
                                          max(1.0, left), what=f"{what}.process(seq, seed)",
                                          timeout_s=max(1.0, left) + 10)
            results.update({int(s): v for s, v in out.get("results", {}).items()})
            lost.update({int(s): str(v) for s, v in out.get("lost", {}).items()})
    finally:
        learner.kit.release(stashed("worker"), what="releasing the actor")
        report = grader.kit.ledger_report(what="reading the ledger", timeout_s=T.restart_timeout_s)
    chaos = faults.ChaosReport(n, results, lost, [tuple(e) for e in report["entries"]], report["kills"],
                               clock.perf_counter() - t0)
    return chaos, [faults.tiny_item(s) for s in seeds], kill_at


def _chaos(session: Session):
    return session.memo(measure_chaos, lambda: measure_chaos(session))


def _why_lost(lost: dict) -> str:
    reasons = Counter(lost.values())
    text = " ".join(lost.values())
    if "not restarted" in text:
        return ("the worker never came back after a kill -- restarts are off "
                "(set max_restarts=-1 on the actor)")
    if any(k in text for k in ("ActorDiedError", "ActorUnavailableError", "RayActorError")):
        return ("their calls failed when the worker was killed and were not retried -- delivery was "
                "at-most-once (set max_task_retries=-1 for at-least-once)")
    reason, count = reasons.most_common(1)[0]
    return f"e.g. {count} with: {reason}"


@register(LAB, "chaos-complete")
def chaos_complete(session):
    """>= 1,000 items under repeated worker kills: every item completes with the right value."""
    report, expected, kill_at = _chaos(session)
    n = report.n
    if report.lost:
        raise AssertionError(f"{len(report.lost)} of {n:,} items were lost under {len(report.kills)} worker "
                             f"kills: {_why_lost(report.lost)} (completion guarantee broken)")
    wrong = [s for s in range(n) if report.results.get(s) != expected[s]]
    if wrong:
        s = wrong[0]
        raise AssertionError(f"{len(wrong)} of {n:,} items returned a wrong value (seq {s}: "
                             f"{report.results.get(s)!r}, expected faults.tiny_item(seed) = {expected[s]!r})")
    if len(report.kills) < len(kill_at):
        raise AssertionError(f"only {len(report.kills)} of {len(kill_at)} planned kills happened: process "
                             "must apply each item's effect with ledger.add(seq, value), so completion under "
                             "failure was not tested")


@register(LAB, "chaos-exactly-once")
def chaos_exactly_once(session):
    """... and no effect was applied twice; every item that returned has its one effect in the ledger."""
    report, expected, kill_at = _chaos(session)
    n = report.n
    dup = report.duplicates()
    if dup:
        s = min(dup)
        raise AssertionError(f"{len(dup)} of {n:,} effects were applied more than once (seq {s}: {dup[s]}x) "
                             f"across {len(report.kills)} kills: a retried call re-applied its update -- skip "
                             "it when the ledger has already applied that sequence number (a set kept in "
                             f"the actor's memory is lost with the process) (exactly-once broken)")
    # An item whose call failed may or may not have applied its effect (at-most-once):
    # chaos-complete scores those. Here: every item that returned has exactly one effect.
    missing = [s for s in report.missing() if s in report.results]
    if missing:
        s = missing[0]
        raise AssertionError(f"{len(missing)} of {n:,} items returned a value but their effect never reached "
                             f"the ledger (seq {s} first): process must apply it with ledger.add(seq, value) "
                             f"(exactly-once broken: lost effects)")
    bad = [(s, v) for s, v in report.entries if v != expected[s]]
    if bad:
        s, v = bad[0]
        raise AssertionError(f"{len(bad)} effects carry a wrong value (seq {s}: {v!r}, expected {expected[s]!r})")
    if len(report.kills) < len(kill_at):  # a worker whose every call fails applies nothing twice, vacuously
        raise AssertionError(f"only {len(report.kills)} of {len(kill_at)} planned kills happened and "
                             f"{len(report.entries):,} of {n:,} effects reached the ledger: exactly-once was not "
                             "tested under failure (process must apply each item's effect with ledger.add(seq, value))")


def calibrate(session: Session) -> list[str]:
    """The reference through every check, with the numbers the grader saw."""
    out = []
    for name in session.checks:
        t = clock.perf_counter()
        r = session.run(name)
        out.append(f"{name}: {'pass' if r.passed else 'FAIL ' + r.message} ({clock.perf_counter() - t:.1f} s)")
    report = _chaos(session)[0]
    out.append(f"chaos: {report.n} items, {len(report.kills)} kills, {report.seconds:.1f} s")
    return out
