"""Checks for 02_restart_recovery: every point here is earned under injected failures.

* **latency**: the grader hands the learner's ``recovery_latency(actor, kill)`` its own probe
  actors and a ``kill`` that it performs itself (SIGKILL of the worker process, or
  ``ray.kill(..., no_restart=False)``). The probe's new process records, on its own clock, when
  it first answered; the learner's number must lie between that and the moment the function
  returned (with a small slack).
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
import random
import tempfile
from collections import Counter

import ray

from course import cluster, faults

from .. import harness
from ..targets import LAB02 as T
from . import register

LAB = "02_restart_recovery"
SEED = int(os.environ.get("AUTOGRADER_SEED") or random.SystemRandom().randrange(2**31))


def _rng(salt: int) -> random.Random:
    return random.Random(SEED * 1000 + salt)


def _ray() -> None:
    cluster.start()  # again: the notebook may have shut Ray down or left an emulated cluster


def _actor_class(obj, name: str) -> None:
    if not isinstance(obj, ray.actor.ActorClass):
        kind = "a plain class" if isinstance(obj, type) else f"a {type(obj).__name__}"
        raise AssertionError(f"{name} is not a Ray actor class (it is {kind}): make it one with "
                             "@ray.remote or ray.remote(...)(cls)")


def _constructed(actor, what: str) -> None:
    """Wait for the actor's constructor; a failing constructor becomes a one-line reason."""
    try:
        ray.get(actor.__ray_ready__.remote(), timeout=T.call_timeout_s)
    except ray.exceptions.ActorDiedError as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        last = lines[-1] if lines else "ActorDiedError"
        if "NotImplementedError" in last:
            raise AssertionError(f"{what}.__init__ is not implemented yet (it raises NotImplementedError)") from None
        raise AssertionError(f"{what}.__init__ raised {last[:200]}") from None
    except ray.exceptions.GetTimeoutError:
        raise AssertionError(f"{what}.__init__ did not finish within {T.call_timeout_s:g} s") from None


# --- recovery latency ------------------------------------------------------------------------

@ray.remote(num_cpus=0)
class Probe:
    """The grader's actor: ``ping()`` returns its pid; each process notes its first ping."""

    def __init__(self):
        import time

        self.born = time.monotonic()
        self.first_ping = None

    def ping(self):
        import time

        if self.first_ping is None:
            self.first_ping = time.monotonic()
        return os.getpid()

    def info(self):
        return os.getpid(), self.born, self.first_ping


_probes: dict = {}


def _probe(retries: int):
    """One probe per retry setting, reused across checks (creating actors costs seconds)."""
    if retries not in _probes:
        _probes[retries] = Probe.options(max_restarts=-1, max_task_retries=retries).remote()
    return _probes[retries]


def _one_latency(recovery_latency, how: str, retries: int) -> str | None:
    """Run the learner's function once against a grader kill; a failure reason, or None."""
    probe = _probe(retries)
    pid = faults.actor_pid(probe, timeout_s=T.restart_timeout_s)
    killed = {}

    def kill():
        if killed:
            raise RuntimeError("kill() may be called once per measurement")
        killed["at"] = harness.monotonic()
        faults.KILLS[how](probe, pid)

    got = harness.call(recovery_latency, probe, kill, what="recovery_latency(actor, kill)",
                       timeout_s=T.call_timeout_s)
    returned = harness.monotonic()
    if not killed:
        return f"recovery_latency never called kill() (after a {how})"
    try:
        got = float(got)
    except (TypeError, ValueError):
        return f"recovery_latency returned {got!r}; expected seconds (a number)"
    new_pid, _ = faults.wait_until_answers(probe, old_pid=pid, timeout_s=T.restart_timeout_s)
    _, born, first = ray.get(probe.info.remote())
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


def _latency_check(recovery_latency, how: str, retries: int) -> None:
    _ray()
    with faults.quiet_stderr():
        reason = _one_latency(recovery_latency, how, retries)
    if reason:
        raise AssertionError(reason + f" (seed {SEED})")


@register(LAB, "latency-sigkill", 2)
def latency_sigkill(recovery_latency):
    """The learner's recovery latency after the grader SIGKILLs the actor's process.

    The probe has ``max_task_retries=0``: calls fail fast while it restarts."""
    _latency_check(recovery_latency, "sigkill", 0)


@register(LAB, "latency-raykill", 2)
def latency_raykill(recovery_latency):
    """... and after ``ray.kill(actor, no_restart=False)``, which returns before the old process is gone.

    The probe has ``max_task_retries=-1``: calls wait while it restarts."""
    _latency_check(recovery_latency, "ray.kill", -1)


# --- checkpointed state ----------------------------------------------------------------------

_ckpt: dict = {}


def _checkpoint_run(CheckpointedAccumulator):
    """Feed, kill at seeded items, read the state back, replay from it. Memoised per class."""
    if CheckpointedAccumulator in _ckpt:
        result = _ckpt[CheckpointedAccumulator]
    else:
        try:
            with faults.quiet_stderr():
                result = _do_checkpoint_run(CheckpointedAccumulator)
        except AssertionError as exc:
            result = exc
        _ckpt[CheckpointedAccumulator] = result
    if isinstance(result, AssertionError):
        raise result
    return result


def _do_checkpoint_run(cls):
    _actor_class(cls, "CheckpointedAccumulator")
    _ray()
    rng = _rng(20)
    every = rng.randint(*T.ckpt_every)
    xs = [rng.randint(1, 1000) for _ in range(T.ckpt_items)]
    kills = sorted(rng.sample([n for n in range(every + 1, T.ckpt_items - 1) if n % every], T.ckpt_kills))
    path = os.path.join(tempfile.mkdtemp(prefix="ckpt-"), f"accumulator-{SEED}.json")
    what = "CheckpointedAccumulator"
    actor = harness.call(lambda: cls.options(max_restarts=-1, max_task_retries=0).remote(path, every),
                         what=f"{what}.remote(path, every)")
    _constructed(actor, what)

    def feed(lo, hi):
        refs = [actor.add.remote(x) for x in xs[lo:hi]]
        harness.call(ray.get, refs, what=f"{what}.add", timeout_s=T.call_timeout_s)

    def state():
        got = harness.call(ray.get, actor.state.remote(), what=f"{what}.state()", timeout_s=T.call_timeout_s)
        try:
            count, total = got
            return int(count), total
        except (TypeError, ValueError):
            raise AssertionError(f"{what}.state() returned {got!r}; expected (count, total)") from None

    events, fed, final = [], 0, None
    try:
        for n in kills:
            feed(fed, n)
            pid = faults.actor_pid(actor, timeout_s=T.restart_timeout_s)
            faults.sigkill(actor, pid)
            faults.wait_until_answers(actor, old_pid=pid, timeout_s=T.restart_timeout_s)
            count, total = state()
            events.append((n, count, total))
            if not 0 <= count <= n:
                break
            fed = count  # the grader's source is replayable: resend from where the actor resumed
        else:
            feed(fed, len(xs))
            final = state()
    except faults.ActorGone as exc:
        raise AssertionError(f"{what} did not come back after a kill: {exc}") from None
    finally:
        ray.kill(actor)
    return {"every": every, "xs": xs, "events": events, "final": final, "path": path}


@register(LAB, "checkpoint-resume", 3)
def checkpoint_resume(CheckpointedAccumulator):
    """After each SIGKILL the actor resumes from a real, consistent checkpoint; the end state is right."""
    run = _checkpoint_run(CheckpointedAccumulator)
    every, xs = run["every"], run["xs"]
    for n, count, total in run["events"]:
        if not 0 <= count <= n:
            raise AssertionError(f"after a kill at item {n} the actor claims {count} items: it cannot have "
                                 f"more than it was sent (checkpoint every {every}; seed {SEED})")
        if count == 0:
            raise AssertionError(f"after a SIGKILL at item {n} the actor came back with 0 items: the "
                                 f"constructor re-ran with empty state -- save (count, total) every {every} "
                                 f"items to path and restore it in __init__ (state guarantee broken; seed {SEED})")
        if total != sum(xs[:count]):
            raise AssertionError(f"after a kill at item {n} the actor resumed with count {count} but total "
                                 f"{total!r}, not the {sum(xs[:count])} of its first {count} items: the "
                                 f"checkpoint is inconsistent (seed {SEED})")
    if run["final"] != (len(xs), sum(xs)):
        raise AssertionError(f"after all {len(xs)} items (replayed from each checkpoint) the actor reports "
                             f"{run['final']}; the grader's truth is ({len(xs)}, {sum(xs)}) (seed {SEED})")


@register(LAB, "checkpoint-interval", 2)
def checkpoint_interval(CheckpointedAccumulator):
    """Work redone after each kill is at most one checkpoint interval."""
    run = _checkpoint_run(CheckpointedAccumulator)
    every = run["every"]
    for n, count, _ in run["events"]:
        if n - count > every:
            raise AssertionError(f"killed at item {n}, the actor resumed from item {count}: {n - count} "
                                 f"items redone, more than one checkpoint interval ({every}); checkpoint "
                                 f"every `every` items (seed {SEED})")


# --- chaos: exactly-once effects under repeated kills -----------------------------------------

_chaos: dict = {}


def _chaos_run(PipelineWorker):
    if PipelineWorker in _chaos:
        result = _chaos[PipelineWorker]
    else:
        try:
            with faults.quiet_stderr():
                result = _do_chaos_run(PipelineWorker)
        except AssertionError as exc:
            result = exc
        _chaos[PipelineWorker] = result
    if isinstance(result, AssertionError):
        raise result
    return result


def _do_chaos_run(cls):
    _actor_class(cls, "PipelineWorker")
    _ray()
    rng = _rng(30)
    n = T.chaos_items
    seeds = [rng.randrange(2**31) for _ in range(n)]
    kill_at = faults.kill_points(n, T.chaos_kill_every, rng)
    ledger = faults.Ledger.remote()
    worker = harness.call(cls.remote, ledger, what="PipelineWorker.remote(ledger)")
    _constructed(worker, "PipelineWorker")
    try:
        report = harness.call(faults.chaos_run, worker, ledger, seeds, kill_at, timeout_s=T.chaos_timeout_s,
                              what="the chaos run of PipelineWorker")
    finally:
        ray.kill(worker)
        ray.kill(ledger)
    expected = [faults.tiny_item(s) for s in seeds]
    return report, expected, kill_at


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


@register(LAB, "chaos-complete", 3)
def chaos_complete(PipelineWorker):
    """>= 1,000 items under repeated worker kills: every item completes with the right value."""
    report, expected, kill_at = _chaos_run(PipelineWorker)
    n = report.n
    if report.lost:
        raise AssertionError(f"{len(report.lost)} of {n:,} items were lost under {len(report.kills)} worker "
                             f"kills: {_why_lost(report.lost)} (completion guarantee broken; seed {SEED})")
    wrong = [s for s in range(n) if report.results.get(s) != expected[s]]
    if wrong:
        s = wrong[0]
        raise AssertionError(f"{len(wrong)} of {n:,} items returned a wrong value (seq {s}: "
                             f"{report.results.get(s)!r}, expected faults.tiny_item(seed) = {expected[s]!r})")
    if len(report.kills) < len(kill_at):
        raise AssertionError(f"only {len(report.kills)} of {len(kill_at)} planned kills happened: process "
                             "must apply each item's effect with ledger.add(seq, value), so completion under "
                             f"failure was not tested (seed {SEED})")


@register(LAB, "chaos-exactly-once", 3)
def chaos_exactly_once(PipelineWorker):
    """... and no effect was applied twice; every item that returned has its one effect in the ledger."""
    report, expected, kill_at = _chaos_run(PipelineWorker)
    n = report.n
    dup = report.duplicates()
    if dup:
        s = min(dup)
        raise AssertionError(f"{len(dup)} of {n:,} effects were applied more than once (seq {s}: {dup[s]}x) "
                             f"across {len(report.kills)} kills: a retried call re-applied its update -- skip "
                             "it when the ledger has already applied that sequence number (a set kept in "
                             f"the actor's memory is lost with the process) (exactly-once broken; seed {SEED})")
    # An item whose call failed may or may not have applied its effect (at-most-once):
    # chaos-complete scores those. Here: every item that returned has exactly one effect.
    missing = [s for s in report.missing() if s in report.results]
    if missing:
        s = missing[0]
        raise AssertionError(f"{len(missing)} of {n:,} items returned a value but their effect never reached "
                             f"the ledger (seq {s} first): process must apply it with ledger.add(seq, value) "
                             f"(exactly-once broken: lost effects; seed {SEED})")
    bad = [(s, v) for s, v in report.entries if v != expected[s]]
    if bad:
        s, v = bad[0]
        raise AssertionError(f"{len(bad)} effects carry a wrong value (seq {s}: {v!r}, expected {expected[s]!r})")


def calibrate() -> list[str]:
    """The reference through every check, with the numbers the grader saw."""
    from ..reference import lab02 as reference

    out = []
    for name, fn, arg in [("latency-sigkill", latency_sigkill, reference.recovery_latency),
                          ("latency-raykill", latency_raykill, reference.recovery_latency),
                          ("checkpoint-resume", checkpoint_resume, reference.CheckpointedAccumulator),
                          ("checkpoint-interval", checkpoint_interval, reference.CheckpointedAccumulator),
                          ("chaos-complete", chaos_complete, reference.PipelineWorker),
                          ("chaos-exactly-once", chaos_exactly_once, reference.PipelineWorker)]:
        t = harness.perf_counter()
        try:
            fn(arg)
            out.append(f"{name}: pass ({harness.perf_counter() - t:.1f} s)")
        except AssertionError as exc:
            out.append(f"{name}: FAIL {exc}")
    report = _chaos[reference.PipelineWorker][0]
    out.append(f"chaos: {report.n} items, {len(report.kills)} kills, {report.seconds:.1f} s")
    return out
