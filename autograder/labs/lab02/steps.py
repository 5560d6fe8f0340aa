"""02_restart_recovery's kit steps (:mod:`autograder.kernel.routines`): learner classes as actors
and the chaos run on the kernel's side; the grader's probe and ledger (:mod:`.instruments`), and its
kills, on the grader's side (the process that starts the lab's Ray: :meth:`Session.ray_of`).
Imported by both; they decide nothing (the checks do)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import ray

from course import cluster, faults

from ...kernel.routines import export, step
from ...kernel.stash import STASH
from .targets import TARGETS as T
from ..instruments import ClosedActor
from .instruments import Ledger, Probe, wait_restarted


# --- kit steps: the kernel's side (learner classes as actors) -----------------------------------

def _actor_class(obj, name: str) -> None:
    if not isinstance(obj, ray.actor.ActorClass):
        kind = "a plain class" if isinstance(obj, type) else f"a {type(obj).__name__}"
        raise AssertionError(f"{name} is not a Ray actor class (it is {kind}): make it one with "
                             "@ray.remote or ray.remote(...)(cls)")


def _constructed(actor, what: str) -> None:
    """Wait for the actor's constructor; a failing constructor becomes a one-line reason."""
    try:
        ray.get(actor.__ray_ready__.remote(), timeout=T.restart_timeout_s)
    except ray.exceptions.ActorDiedError as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        last = lines[-1] if lines else "ActorDiedError"
        if "NotImplementedError" in last:
            raise AssertionError(f"{what}.__init__ is not implemented yet (it raises NotImplementedError)") from None
        raise AssertionError(f"{what}.__init__ raised {last[:200]}") from None
    except ray.exceptions.GetTimeoutError:
        raise AssertionError(f"{what}.__init__ did not finish within {T.restart_timeout_s:g} s") from None


@step
def start_actor(cls, name: str, options: dict, *args):
    """Kernel side: an actor of the learner's class ``cls`` with ``options``, constructed."""
    _actor_class(cls, name)
    cluster.start()
    actor = cls.options(**options).remote(*args)
    _constructed(actor, name)
    return actor


@step
def chaos_items(worker, pairs: list, timeout_s: float) -> dict:
    """Kernel side: ``worker.process(seq, seed)`` for every pair, all submitted at once; each
    item's value, or why its call failed."""
    deadline = time.monotonic() + timeout_s
    refs = [worker.process.remote(seq, seed) for seq, seed in pairs]
    results, lost = {}, {}
    for (seq, _), ref in zip(pairs, refs):
        try:
            value = ray.get(ref, timeout=max(1.0, deadline - time.monotonic()))
            results[str(seq)] = value if isinstance(value, (int, float)) else repr(value)[:40]
        except ray.exceptions.GetTimeoutError:
            lost[str(seq)] = f"no answer within the run's {timeout_s:g} s"
        except Exception as exc:  # the learner's task may raise anything
            cause = getattr(exc, "cause", None)
            lost[str(seq)] = faults._first_line(cause if isinstance(cause, BaseException) else exc)
    return {"results": results, "lost": lost}


# --- kit steps: the grader's side (the grader's actors, kills) -----------------------------------

@step
def probe(retries: int) -> str:
    """Reference side: the grader's probe (restarts on, ``max_task_retries=retries``), exported."""
    cluster.start()
    key = f"probe{retries}"
    if key not in STASH.held:
        STASH.held[key] = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=int(retries))(Probe).remote()
    return export(STASH.held[key])


@step
def probe_pid(retries: int) -> int:
    return int(ray.get(STASH.held[f"probe{retries}"].ping.remote(), timeout=T.restart_timeout_s))


@step
def kill_probe(retries: int, how: str, pid: int) -> float:
    """Reference side: kill the probe as ``how`` says; the machine's monotonic clock at the kill."""
    at = time.monotonic()
    faults.KILLS[how](STASH.held[f"probe{retries}"], int(pid))
    return at


@step
def probe_recovered(retries: int, old_pid: int) -> list:
    """Reference side: wait until a new probe process answers; (pid, constructed, first ping)."""
    probe_ = STASH.held[f"probe{retries}"]
    deadline = time.monotonic() + T.restart_timeout_s
    while time.monotonic() < deadline:  # the grader's own ping, after the learner's calls
        try:
            if ray.get(probe_.ping.options(max_task_retries=-1).remote(), timeout=5) != int(old_pid):
                return list(ray.get(probe_.info.remote(), timeout=T.restart_timeout_s))
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            time.sleep(0.01)
    raise AssertionError(f"the grader's probe did not answer from a new process within {T.restart_timeout_s:g} s")


def _grader_classes() -> set[str]:
    """Names of the grader's own actor classes (every :class:`~autograder.labs.instruments.ClosedActor`)."""
    out, todo = set(), [ClosedActor]
    while todo:
        for sub in todo.pop().__subclasses__():
            out.add(sub.__name__)
            todo.append(sub)
    return out


def _learner_pid(actor_id: str, what: str) -> int:
    """The pid of the learner's actor, from Ray's actor table; never one of the grader's actors."""
    deadline = time.monotonic() + T.restart_timeout_s
    while True:
        record = cluster.gcs_actor(actor_id)
        if not record or record.get("ActorClassName") in _grader_classes():
            raise AssertionError(f"no {what} actor with that id in Ray's records")
        if record.get("State") == "ALIVE" and record.get("Pid"):
            return int(record["Pid"])
        if record.get("State") == "DEAD" or time.monotonic() > deadline:
            raise AssertionError(f"{what} is not alive (state {record.get('State')}): restarts are off?")
        time.sleep(0.01)


@step
def scratch_folder() -> str:
    """Reference side: a fresh folder for the learner's checkpoints, made where the lab's Ray
    and the kernel see it (in the sandbox, that Ray's own /tmp; not the grader's)."""
    folder = tempfile.mkdtemp(prefix="ckpt-")
    os.chmod(folder, 0o770)
    return folder


@step
def remove_folder(folder: str) -> None:
    """Reference side: throw a checkpoint folder away."""
    shutil.rmtree(folder, ignore_errors=True)


@step
def kill_actor(actor_id: str, what: str) -> int:
    """Reference side: SIGKILL the learner's actor process (found in Ray's records); its pid."""
    pid = _learner_pid(actor_id, what)
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
    return pid


@step
def await_restart(actor_id: str, old_pid: int) -> int:
    """Reference side: the learner's actor's new pid, once Ray's records show it alive again."""
    try:
        return wait_restarted(actor_id, int(old_pid), timeout_s=T.restart_timeout_s)
    except faults.ActorGone as exc:
        raise AssertionError(f"did not come back after a kill: {exc}") from None


@step
def ledger() -> str:
    """Reference side: a fresh ledger (the grader's ground truth for the chaos run), exported."""
    cluster.start()
    STASH.held["ledger"] = Ledger.remote()
    return export(STASH.held["ledger"])


@step
def arm_ledger(seq: int, actor_id: str, what: str) -> None:
    """Reference side: the ledger SIGKILLs the learner's worker when item ``seq``'s effect lands."""
    ray.get(STASH.held["ledger"].arm.remote(int(seq), _learner_pid(actor_id, what)))


@step
def ledger_report() -> dict:
    led = STASH.held.pop("ledger")
    out = {"entries": ray.get(led.entries.remote()), "kills": ray.get(led.kills.remote())}
    ray.kill(led)
    return out
