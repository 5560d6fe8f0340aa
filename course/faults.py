"""Fault injection for Ray, and the Kubernetes restart model it is compared with.

Ray side (real failures, on a local Ray or an emulated cluster):

* :func:`actor_pid` asks an actor for the pid of its worker process (through Ray's built-in
  ``__ray_call__``, so the actor needs no special method);
* :func:`sigkill` kills that process with SIGKILL -- a crash, as the OOM killer would do it;
* :func:`restart` is ``ray.kill(actor, no_restart=False)`` *plus* the wait until the
  replacement answers (``ray.kill`` returns before the old process is even gone, and the old
  process may still answer a call made right after it);
* :func:`recovery_latency` times kill -> first successful call answered by a new process;
* :func:`remove_node` is node loss on ``course.cluster.emulated(...)``;
* :func:`chaos_run` drives many tiny items through a worker actor while a :class:`Ledger`
  (a stand-in for a database) SIGKILLs it at chosen items, and keeps the ground truth.

Importing this module mutes Ray's driver-side reports of worker deaths and task retries
(:func:`mute_expected_failure_reports`): here they are caused on purpose.

Kubernetes side (a documented *model*, not a measurement): :func:`cold_start` measures a
fresh Python process importing the course's stack -- the floor of any container restart --
and :func:`crashloop_backoff` / :func:`k8s_restart_model` add the documented CrashLoopBackOff
delays (kubernetes.io, "Pod Lifecycle": 10 s, doubling, capped at 5 min). That is the kubelet
restarting a container in place; a pod that cannot restart is replaced instead -- on KubeRay the
operator deletes a failed Ray pod whose ``restartPolicy`` is ``Never`` (which it sets itself with
autoscaler v2) and creates a new one (KubeRay ``ray-operator/controllers/ray/raycluster_controller.go``,
``shouldDeletePod``), which the model does not cover: scheduling, image pull, a new node.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

import ray
from ray.exceptions import ActorDiedError, GetTimeoutError, RayActorError


# Captured at import, like the grader's clocks: a notebook may patch time or os later.
_clock = time.perf_counter
_sleep = time.sleep
_os_kill = os.kill

# Kubernetes facts used by the model (kubernetes.io, "Pod Lifecycle" -> container restarts;
# "Taints and Tolerations" -> the default not-ready/unreachable tolerations).
BACKOFF_INITIAL_S = 10.0
BACKOFF_CAP_S = 300.0
NODE_FAILURE_TOLERATION_S = 300.0
# kube-controller-manager's --node-monitor-grace-period: how long a silent node stays Ready before
# its Ready condition turns Unknown (with the node.kubernetes.io/unreachable taint; NotReady is a
# kubelet that answers and reports itself not ready), and the 300 s above start counting. 50 s from Kubernetes 1.32,
# 40 s before (kubernetes.io "kube-controller-manager" reference; kubernetes/kubernetes PR #126287).
NODE_MONITOR_GRACE_S = 50.0
# Ray's GCS health checks of each node: the defaults of `src/ray/common/ray_config_def.h`, used
# when the installed Ray cannot be asked (`health_checks()` reads the installed Ray's values).
HEALTH_CHECK_DEFAULTS = {"initial_delay_ms": 5000, "period_ms": 3000, "timeout_ms": 10000,
                         "failure_threshold": 5}
DEAD_AFTER_S = 2.0  # ActorDiedError for this long: the actor is not coming back


# --- quiet: expected failure reports are not news here -----------------------------------------

_EXPECTED = ("worker died or was killed", "retries remaining", "temporarily unavailable")


def mute_expected_failure_reports() -> None:
    """Drop Ray's driver-side reports of worker deaths and task retries (we cause them on purpose).

    Ray prints every worker death and every retried call of the job on the driver's stdout, from
    a background thread (``ray._private.worker.print_to_stdstream``); a chaos run would bury the
    notebook under them. Other messages still print. Called when this module is imported.
    """
    from ray._private import worker

    if not hasattr(worker, "print_to_stdstream"):  # a private hook: if Ray renames it, print all
        return
    original = getattr(worker.print_to_stdstream, "__wrapped__", worker.print_to_stdstream)

    def filtered(data, ignore_prefix):
        lines = [ln for ln in data.get("lines", []) if not any(e in ln for e in _EXPECTED)]
        if lines:
            original({**data, "lines": lines}, ignore_prefix)

    filtered.__wrapped__ = original
    worker.print_to_stdstream = filtered


mute_expected_failure_reports()


@contextlib.contextmanager
def quiet_stderr():
    """Silence file descriptor 2 (Ray's C++ warnings) and ``sys.stderr`` for a block.

    nbgrader scores 0 for a graded cell that writes to stderr; Ray's core worker writes some
    warnings there directly (e.g. when an actor with a restart policy gets a handle argument).
    """
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


class ActorGone(RuntimeError):
    """The actor is dead for good (no restarts left), or did not come back in time."""


def _getpid(self) -> int:  # runs inside the actor, via __ray_call__
    return os.getpid()


def actor_pid(actor, *, timeout_s: float = 30.0) -> int:
    """The pid of the worker process running ``actor`` (waits while it restarts)."""
    return wait_until_answers(actor, old_pid=None, timeout_s=timeout_s)[0]


def wait_until_answers(actor, *, old_pid: int | None, timeout_s: float = 60.0,
                       poll_s: float = 0.005) -> tuple[int, float]:
    """Poll ``actor`` until a process other than ``old_pid`` answers a call.

    Returns ``(new_pid, clock)`` where ``clock`` is :func:`time.perf_counter` when the answer
    arrived. A call that fails while the actor restarts (``ActorUnavailableError``) is simply
    retried; an actor that is dead for good raises :class:`ActorGone` at once.
    """
    deadline = _clock() + timeout_s
    died_since = None  # a call failing with ActorDiedError for this long means: gone for good
    while True:
        left = deadline - _clock()
        if left <= 0:
            raise ActorGone(f"the actor did not answer from a new process within {timeout_s:g} s")
        try:
            pid = ray.get(actor.__ray_call__.options(max_task_retries=-1).remote(_getpid), timeout=left)
        except ActorDiedError as exc:
            died_since = died_since or _clock()
            if _clock() - died_since > DEAD_AFTER_S:
                raise ActorGone(f"the actor died and was not restarted ({_first_line(exc)})") from None
            _sleep(poll_s)
            continue
        except (RayActorError, GetTimeoutError):
            _sleep(poll_s)
            continue
        if pid != old_pid:
            return pid, _clock()
        _sleep(poll_s)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:160]}" if lines else type(exc).__name__


def sigkill(actor, pid: int | None = None) -> tuple[int, float]:
    """SIGKILL the actor's worker process; returns ``(pid, clock at the kill)``."""
    pid = actor_pid(actor) if pid is None else pid
    t = _clock()
    try:
        _os_kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # already gone
    return pid, t


def ray_kill(actor, pid: int | None = None) -> tuple[int, float]:
    """``ray.kill(actor, no_restart=False)``; returns ``(old pid, clock at the kill)``."""
    pid = actor_pid(actor) if pid is None else pid
    t = _clock()
    ray.kill(actor, no_restart=False)
    return pid, t


KILLS = {"sigkill": sigkill, "ray.kill": ray_kill}


@dataclass(frozen=True)
class Recovery:
    """One kill and the recovery after it."""

    how: str
    old_pid: int
    new_pid: int
    seconds: float  # kill -> first successful call answered by the new process


def recovery_latency(actor, how: str = "sigkill", *, timeout_s: float = 60.0) -> Recovery:
    """Kill ``actor`` (``"sigkill"`` or ``"ray.kill"``) and time it until a new process answers."""
    old, t_kill = KILLS[how](actor)
    new, t_ok = wait_until_answers(actor, old_pid=old, timeout_s=timeout_s)
    return Recovery(how, old, new, t_ok - t_kill)


def restart(actor, *, timeout_s: float = 60.0) -> float:
    """``ray.kill(actor, no_restart=False)`` that returns only once the replacement answers.

    Returns the seconds it took. The actor needs ``max_restarts`` != 0.
    """
    return recovery_latency(actor, "ray.kill", timeout_s=timeout_s).seconds


def recovery_latencies(actor, repeats: int = 5, how: str = "sigkill", *,
                       timeout_s: float = 60.0) -> list[float]:
    """``repeats`` kill/recover cycles of one actor; seconds for each."""
    return [recovery_latency(actor, how, timeout_s=timeout_s).seconds for _ in range(repeats)]


def percentile(samples: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation between order statistics."""
    xs = sorted(samples)
    if not xs:
        raise ValueError("no samples")
    k = (len(xs) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary(samples: list[float]) -> dict:
    """p50, p95, max and n of a list of durations (seconds)."""
    return {"p50": statistics.median(samples), "p95": percentile(samples, 95),
            "max": max(samples), "n": len(samples)}


def cdf(samples: list[float]) -> tuple[list[float], list[float]]:
    """Points of the empirical CDF: sorted values and the fraction of samples <= each."""
    xs = sorted(samples)
    return xs, [(i + 1) / len(xs) for i in range(len(xs))]


# --- node loss on an emulated cluster -------------------------------------------------------

def worker_nodes(cluster) -> list:
    """The emulated cluster's nodes other than the head (the ones safe to lose)."""
    return [n for n in cluster.list_all_nodes() if n is not cluster.head_node]


def remove_node(cluster, node=None) -> str:
    """Lose a node of an emulated cluster (its raylet, object store and workers die).

    ``node`` defaults to the last non-head node. Returns the lost node's id.
    """
    node = node or worker_nodes(cluster)[-1]
    node_id = node.node_id
    cluster.remove_node(node)
    return node_id


def object_nodes(ref) -> list[str]:
    """Ids of the nodes holding a copy of ``ref``'s object (Ray's own record)."""
    from ray.experimental import get_object_locations

    return list(get_object_locations([ref])[ref].get("node_ids", []))


# --- a chaos run: many tiny items, worker kills at chosen moments, ground truth kept ----------

def tiny_item(seed: int) -> float:
    """The chaos run's work item: the course's image kernel on one seeded 8x8 image."""
    from . import backend, kernels

    out = backend.to_host(kernels.process(kernels.make_batch(1, size=8, seed=seed)))
    return float(out[0])


class LedgerBook:
    """A durable store standing in for a database: effects are logged, never lost.

    ``add(seq, value)`` applies one effect (it is *not* idempotent: calling it twice applies
    twice); ``applied(seq)`` says whether an effect with that sequence number was applied.
    ``arm(seq, pid)`` sets a trap: when the effect for ``seq`` arrives, the ledger records it
    and then SIGKILLs ``pid`` -- the worker dies after its effect landed, before it returned,
    which is the moment that tells at-least-once from exactly-once. As an actor: :data:`Ledger`
    (the grader's own, closed to learner code, is lab 02's ``autograder/labs/lab02/instruments.py``).
    """

    def __init__(self):
        self.log: list[tuple[int, float]] = []
        self.done: set[int] = set()
        self.traps: dict[int, int] = {}
        self.fired: list[int] = []

    def applied(self, seq: int) -> bool:
        return seq in self.done

    def add(self, seq: int, value: float) -> None:
        self.log.append((int(seq), float(value)))
        self.done.add(int(seq))
        pid = self.traps.pop(int(seq), None)
        if pid is not None:
            self.fired.append(int(seq))
            try:
                _os_kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def arm(self, seq: int, pid: int) -> None:
        self.traps[int(seq)] = int(pid)

    def entries(self) -> list[tuple[int, float]]:
        return list(self.log)

    def kills(self) -> list[int]:
        return list(self.fired)


Ledger = ray.remote(num_cpus=0, max_restarts=0)(LedgerBook)  # the lesson's ledger: ``faults.Ledger.remote()``


@dataclass
class ChaosReport:
    """What a chaos run saw: results returned, items lost, and the ledger's effects."""

    n: int
    results: dict            # seq -> value returned to the driver
    lost: dict               # seq -> why its call failed
    entries: list            # (seq, value) effects in the ledger, in order
    kills: list              # seqs whose effect triggered a kill
    seconds: float

    def duplicates(self) -> dict:
        """seq -> times applied, for effects applied more than once."""
        from collections import Counter

        return {s: c for s, c in Counter(s for s, _ in self.entries).items() if c > 1}

    def missing(self) -> list[int]:
        """Sequence numbers whose effect never reached the ledger."""
        seen = {s for s, _ in self.entries}
        return [s for s in range(self.n) if s not in seen]


def kill_points(n: int, every: tuple[int, int], rng) -> list[int]:
    """Seeded kill moments: item numbers spaced ``every[0]``..``every[1]`` apart."""
    out, at = [], rng.randint(*every)
    while at < n - 1:
        out.append(at)
        at += rng.randint(*every)
    return out


def chaos_run(worker, ledger, seeds: list[int], kill_at: list[int], *,
              timeout_s: float = 120.0) -> ChaosReport:
    """Send item ``seq`` (``worker.process.remote(seq, seeds[seq])``) for every seq, in chunks
    that each end with one armed kill, and collect what came back.

    Before each chunk the worker's current pid is looked up and the ledger armed to SIGKILL it
    when the chunk's kill item applies its effect. A worker that is gone for good ends the run
    (the remaining items count as lost).
    """
    t0 = _clock()
    n = len(seeds)
    bounds = [0] + [k + 1 for k in kill_at] + [n]
    results, lost = {}, {}
    for lo, hi, k in zip(bounds[:-1], bounds[1:], kill_at + [None]):
        if lo >= hi:
            continue
        if _clock() - t0 > timeout_s:
            lost.update({seq: f"not sent: the run passed {timeout_s:g} s" for seq in range(lo, n)})
            break
        try:
            pid = actor_pid(worker, timeout_s=max(1.0, t0 + timeout_s - _clock()))
        except ActorGone as exc:
            lost.update({seq: str(exc) for seq in range(lo, n)})
            break
        if k is not None:
            ray.get(ledger.arm.remote(k, pid))
        refs = [worker.process.remote(seq, seeds[seq]) for seq in range(lo, hi)]
        for seq, ref in zip(range(lo, hi), refs):
            try:
                results[seq] = ray.get(ref, timeout=max(1.0, t0 + timeout_s - _clock()))
            except GetTimeoutError:
                lost[seq] = f"no answer within the run's {timeout_s:g} s"
            except Exception as exc:  # the learner's task may raise anything
                cause = getattr(exc, "cause", None)
                lost[seq] = _first_line(cause if isinstance(cause, BaseException) else exc)
    entries = ray.get(ledger.entries.remote())
    kills = ray.get(ledger.kills.remote())
    return ChaosReport(n, results, lost, entries, kills, _clock() - t0)


# --- the Kubernetes side: a model ---------------------------------------------------------

def cold_start(code: str = "import numpy, ray, course.kernels", repeats: int = 3) -> list[float]:
    """Seconds for a fresh Python process to run ``code`` and exit, ``repeats`` times.

    A container restart cannot be faster than starting the process it runs, so this is the
    floor of a restart in place (image already on the node; no scheduling, no image pull).
    """
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = []
    for _ in range(repeats):
        t = _clock()
        subprocess.run([sys.executable, "-c", code], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out.append(_clock() - t)
    return out


def crashloop_backoff(restarts: int, *, initial_s: float = BACKOFF_INITIAL_S,
                      cap_s: float = BACKOFF_CAP_S) -> list[float]:
    """Documented delay before restart 1, 2, ...: none, then 10 s, 20 s, 40 s ... capped at 300 s.

    (kubernetes.io "Pod Lifecycle", *How Pods handle problems with containers*: after the
    initial crash the kubelet restarts the container at once; later crashes get an exponential
    back-off -- 10 s, 20 s, 40 s, ... -- capped at five minutes, reset after ten minutes of
    running. Recent releases let a node configure the cap.)
    """
    return [0.0 if k == 0 else min(initial_s * 2 ** (k - 1), cap_s) for k in range(restarts)]


def health_checks() -> dict:
    """The GCS health-check settings of the installed Ray (``ray_config_def.h``: initial delay,
    period, timeout, failure threshold), as this process's Ray config reports them; the
    defaults in :data:`HEALTH_CHECK_DEFAULTS` where it cannot be asked."""
    try:
        from ray._raylet import Config

        return {"initial_delay_ms": int(Config.health_check_initial_delay_ms()),
                "period_ms": int(Config.health_check_period_ms()),
                "timeout_ms": int(Config.health_check_timeout_ms()),
                "failure_threshold": int(Config.health_check_failure_threshold())}
    except Exception:  # noqa: BLE001 -- an older or newer Ray without these accessors
        return dict(HEALTH_CHECK_DEFAULTS)


def node_death_detection_s(checks: dict | None = None) -> dict:
    """About how long the GCS takes to declare a failed node dead, in seconds, two cases.

    The GCS checks each node every ``period``; a check fails at once when the node refuses the
    connection (its machine is up, its raylet gone), or after ``timeout`` when nothing answers
    (machine or network down); the next check follows ``period`` after a failed one, and
    ``failure_threshold`` failures in a row mark the node dead. So about threshold × period
    (``refused``) or threshold × (timeout + period) (``timed_out``), give or take one period
    for where the failure fell between two checks. The initial delay applies only to a node
    that has just registered.
    """
    c = checks or health_checks()
    n, period, timeout = c["failure_threshold"], c["period_ms"] / 1e3, c["timeout_ms"] / 1e3
    return {"refused": n * period, "timed_out": n * (timeout + period)}


def k8s_node_failure_s(grace_s: float = NODE_MONITOR_GRACE_S,
                       toleration_s: float = NODE_FAILURE_TOLERATION_S) -> float:
    """Seconds from a node going silent to its pods' eviction with Kubernetes' defaults: the
    node-monitor grace period (until its Ready condition is Unknown and it carries the
    ``node.kubernetes.io/unreachable`` taint), then the 300 s default toleration of that taint.
    The least it takes: evictions are rate-limited (``--node-eviction-rate``, 0.1 nodes/s by
    default) and slowed or stopped when a large share of a zone is unhealthy (kubernetes.io
    "Nodes", rate limits on eviction). Eviction is not replacement: the evicted pod stays
    ``Terminating`` until the Node object is deleted, its kubelet answers again, the pod is
    force-deleted (kubernetes.io "Force Delete StatefulSet Pods"), or the node gets the
    ``node.kubernetes.io/out-of-service`` taint (kubernetes.io "Node Shutdowns", non-graceful node
    shutdown, GA in Kubernetes 1.28). A ReplicaSet or a Job creates a replacement at eviction (they
    count only pods not being deleted: ``IsPodActive`` in Kubernetes'
    ``pkg/controller/controller_utils.go``), which must then be scheduled and started. A
    StatefulSet does not, and neither does KubeRay: ``reconcilePods`` (KubeRay
    ``ray-operator/controllers/ray/raycluster_controller.go``) lists a worker group's pods, the
    ``Terminating`` ones included, and creates pods only for the difference from its replicas, so
    no new Ray worker pod appears until that pod is gone."""
    return grace_s + toleration_s


def k8s_restart_model(cold_start_s: float, restarts: int) -> list[float]:
    """Modelled seconds from crash k to the container serving again, k = 1..restarts.

    Back-off delay (documented) + cold process start (measured here). A model, not a
    measurement of a cluster: no scheduling, image pull or readiness probe is included, and it
    covers a container restarted in place only -- not a pod deleted and recreated (KubeRay does
    that to a failed Ray pod with ``restartPolicy: Never``, see the module docstring).
    """
    return [delay + cold_start_s for delay in crashloop_backoff(restarts)]
