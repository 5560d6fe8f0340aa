"""Checks for 05_capstone: the learner's sizing plan and Ray Data pipeline.

All grader-side (see :mod:`autograder.checks`). The grader owns the lab's Ray: a process of its
own starts it, and the learner's kernel joins it; graded sandboxed, the reference pipeline runs in
a Ray of its own, out of the kernel's sight (the lab's spec: ``reference_ray``), and the learner's
side is paused while it is timed (:meth:`Session.side_by_side <autograder.grader.session.session.Session.side_by_side>`).

* **The plan**: the learner's ``plan(target, image_px, measured)`` gets the grader's own seeded
  scenarios -- one per limiting resource (GPU compute, per-call overhead, CPU preprocessing,
  network), the measured numbers drawn so that resource binds by a wide margin -- and its
  answers are compared with the grader's model (the reference's ``plan``): the limit named,
  GPUs and CPU workers within a band, batch size and actors per GPU.
* **The pipeline**: the learner's ``build_pipeline(seed, n, batch_size, actors)`` is run by the
  kit on images generated from the grader's seeds (fresh every run); its values are compared
  with the grader's own computation (:func:`course.pipeline.expected`). Whether the model ran in
  an actor pool is read from Ray's actor table by the grader's process on the lab's Ray (the
  actors Ray Data starts for a callable class, of the job whose driver is the learner's kernel:
  :meth:`Session.ray_of <autograder.grader.session.session.Session.ray_of>`), never from the notebook.
  Its images/s is timed on the grader's clock against the reference pipeline, interleaved,
  fresh seeds every round; a round whose results are wrong, or that ran no actor pool, scores 0.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from course import convnet, pipeline

from . import LAB
from .targets import TARGETS as T
from ...transport import named
from ...checks import register, tiers

if TYPE_CHECKING:
    from ...grader.session.session import Session

LIMITS = ("gpu", "overhead", "cpu", "network")
SIZES = (8, 16, 32, 64, 128, 256)
PLAN_KEYS = ("gpus", "actors_per_gpu", "batch_size", "cpu_workers", "limit")


# ---------------------------------------------------------------- the plan

def scenario(session: Session, salt: int, limit: str) -> tuple[float, int, dict]:
    """(target images/s, image side, measured numbers) in which ``limit`` binds by a wide margin.

    GPU-like numbers at ``base_px`` = 224: a model of 20-200 µs launch and 1-10 µs per image
    (1e5-1e6 images/s), whose per-image cost quadruples past a seeded batch size, a drawn part
    of it fixed per image; a per-call overhead around one call's GPU time (or, for
    ``overhead``, several times what the most actors allowed can hide); failures costing a
    drawn detection (10-70 s) plus restart; CPU and network set to 0.25-0.5x (binding) or 2-4x
    (not) of the GPUs' rate.
    """
    model = session.answers()
    rng = session.rng(salt)
    for _ in range(50):
        px = rng.choice((64, 128, 224, 512, 1024))
        cap, t0, u = rng.choice(SIZES[1:5]), rng.uniform(2e-5, 2e-4), rng.uniform(1e-6, 1e-5)
        rates = {str(b): b / (t0 + b * u + 3 * u * max(0, b - cap)) for b in SIZES}
        m = {"kernel_images_per_s": rates, "base_px": 224, "model_fixed_fraction": round(rng.uniform(0.0, 0.3), 3),
             "max_actors_per_gpu": T.plan_max_actors,
             "gpus_per_node": rng.choice((1, 2, 4, 8)), "cpus_per_node": rng.choice((8, 16, 32, 64)),
             "restart_s": round(rng.uniform(0.5, 5.0), 3), "detect_s": round(rng.uniform(10.0, 70.0), 1),
             "failures_per_gpu_hour": round(rng.uniform(0.0, 2.0), 3), "quota_share": rng.choice((0.25, 0.5, 1.0)),
             "cpu_fixed_fraction": round(rng.uniform(0.0, 0.3), 3),
             "jpeg_bytes_fixed": round(rng.uniform(300, 1000)), "jpeg_bytes_per_pixel": round(rng.uniform(0.2, 1.0), 3),
             "cpu_images_per_s": 1e12, "link_bytes_per_s": 1e18}
        m["gpus_per_failure"] = m["gpus_per_node"]  # a lost node: all its GPUs (no draw: the scenarios stay as they were)
        busy = SIZES[-1] / (rates[str(SIZES[-1])] * model["scale"](m, px, m["model_fixed_fraction"]))
        m["call_overhead_s"] = busy * (T.plan_max_actors * rng.uniform(2, 4) if limit == "overhead"
                                       else rng.uniform(0.2, 1.0))
        batch = model["plan"](1.0, px, m)["batch_size"]
        gpu_side = model["node_capacity"](m, px, batch)
        if limit in ("cpu", "network") or limit in gpu_side:
            break
    gpu_side = min(v for k, v in gpu_side.items() if k in ("gpu", "overhead"))
    cpu, net = (rng.uniform(0.25, 0.5) if limit == which else rng.uniform(2, 4) for which in ("cpu", "network"))
    m["cpu_images_per_s"] = gpu_side * cpu / (m["cpus_per_node"] * model["scale"](m, px, m["cpu_fixed_fraction"]))
    m["link_bytes_per_s"] = gpu_side * net * (m["jpeg_bytes_fixed"] + m["jpeg_bytes_per_pixel"] * px ** 2)
    # a target that needs tens of nodes at the binding resource's rate
    binding = gpu_side * min(1.0, cpu, net) * m["quota_share"]
    return round(binding * rng.uniform(10, 60), -2), px, m


def scenario_limits(session: Session) -> list[str]:
    """Which resource binds in each scenario: every one at least once, plus drawn extras, in a
    drawn order (a plan that answers by call order, not from its inputs, is right by chance only)."""
    rng = session.rng(9)
    limits = list(LIMITS) + [rng.choice(LIMITS) for _ in range(T.plan_scenarios - len(LIMITS))]
    rng.shuffle(limits)
    return limits


@dataclass
class Planned:
    """One scenario: the learner's plan and the grader's model's."""

    target: float
    px: int
    measured: dict
    mine: dict
    theirs: dict

    def describe(self) -> str:
        return f"{self.target:,.0f} images/s of {self.px}x{self.px} images"


def plans(session: Session) -> list[Planned]:
    """The learner's plan on the grader's scenarios (asked once per run; every plan check reads it)."""

    def ask():
        out = []
        for salt, limit in enumerate(scenario_limits(session), start=10):
            target, px, m = scenario(session, salt, limit)
            got = session.learner.call("plan", target, px, m, what="plan(target, image_px, measured)",
                                       returns="json")
            if not isinstance(got, dict) or any(k not in got for k in PLAN_KEYS):
                raise AssertionError(f"plan(...) must return a dict with keys {', '.join(PLAN_KEYS)}; got {got!r:.200}")
            out.append(Planned(target, px, m, got, session.answers()["plan"](target, px, m)))
        return out

    return session.memo("plans", ask)


@register(LAB, "plan-limit")
def plan_limit(session):
    """Scenarios in which each resource binds (in a drawn order): the plan names it."""
    for p in plans(session):
        if p.mine["limit"] != p.theirs["limit"]:
            cap = session.answers()["node_capacity"](p.measured, p.px, p.theirs["batch_size"])
            per_node = ", ".join(f"{k} {v:,.0f}" for k, v in cap.items())
            raise AssertionError(f"for {p.describe()}, plan named {p.mine['limit']!r} as the limit; the grader's "
                                 f"model says {p.theirs['limit']!r} (images/s per node: {per_node})")


def _within(got, want: float, slack: float) -> bool:
    return isinstance(got, (int, float)) and not isinstance(got, bool) and abs(got - want) <= max(T.plan_band * want, slack)


@register(LAB, "plan-size")
def plan_size(session):
    """GPUs and CPU workers within the band of the grader's model (or one node's GPUs)."""
    for p in plans(session):
        for key, slack in (("gpus", p.measured["gpus_per_node"]), ("cpu_workers", 1)):
            if not _within(p.mine[key], p.theirs[key], slack):
                raise AssertionError(f"for {p.describe()}, plan asked for {p.mine[key]!r} {key}; the grader's model "
                                     f"needs {p.theirs[key]:,} (allowed ±{T.plan_band:.0%} or ±{slack:g})")


@register(LAB, "plan-batch")
def plan_batch(session):
    """The batch size with the best per-GPU rate, and the actors per GPU that hide the per-call overhead."""
    for p in plans(session):
        for key in ("batch_size", "actors_per_gpu"):
            if p.mine[key] != p.theirs[key]:
                raise AssertionError(f"for {p.describe()}, plan chose {key} = {p.mine[key]!r}; the grader's model "
                                     f"chooses {p.theirs[key]!r}")


# ---------------------------------------------------------------- the pipeline

def _driver_pid(session: Session) -> int:
    """The learner's kernel process (the socket's peer while grading; this process in a notebook),
    numbered as the lab's Ray numbers it (in the sandbox, that Ray's PID namespace)."""
    from ...kernel.channel import innermost_pid

    pid = getattr(session.learner, "_pid", None)
    return innermost_pid(pid) if pid else os.getpid()


def _run(session: Session, side, seed: int, n: int, batch: int, what: str) -> tuple[float, np.ndarray]:
    """(seconds on the grader's clock, values) of one side's pipeline on ``n`` images of ``seed``."""
    seconds, got = side.kit.pipeline_values.timed(named("build_pipeline"), seed, n, batch, T.pool_actors,
                                                  what=what, returns="array")
    data = np.asarray(got["data"], dtype=np.float64)
    shape = got.get("shape") if isinstance(got, dict) else None
    try:  # the shape is the kernel's word: used only when it fits the data
        return seconds, data.reshape([int(d) for d in shape])
    except (TypeError, ValueError):
        return seconds, data


def _wrong(values: np.ndarray, seed: int, n: int, ids=None) -> str | None:
    """Why ``values`` (one row of logits per image) are not the grader's own computation of the
    images ``ids`` (all ``n`` when None), or None. The grader decodes the JPEGs and runs the
    network with NumPy on its side; a GPU's float32 sums may differ in the last digits."""
    ids = np.arange(n) if ids is None else np.asarray(ids)
    shape = (n, convnet.CLASSES)
    if values.shape != shape:
        return f"build_pipeline gave values of shape {values.shape} for {n} images; expected {shape} (logits per image)"
    want = pipeline.expected(seed, n, ids)
    ok = np.isclose(values[ids], want, rtol=T.value_rtol, atol=T.value_atol).all(axis=1)
    if not ok.all():
        return (f"build_pipeline gave {int((~ok).sum())} of {len(ids)} checked images values that are not the "
                "grader's (image order; the network on pipeline.preprocess'd images)")
    return None


@dataclass
class PoolRun:
    """The correctness run: what was wrong, and Ray's pool actors of the learner's job it started."""

    wrong: str | None
    actors: int
    batches: int  # blocks bundles Ray's task records show those actors processed


def measure_pool(session: Session) -> PoolRun:
    """One small run of the learner's pipeline on the grader's seed, with Ray's actor table around it."""
    grader, pid = session.ray_of(session.learner), _driver_pid(session)
    seed = session.rng(1).randrange(10_000_000)
    before = set(grader.kit.map_workers(pid, what="reading Ray's actor table", timeout_s=30))
    _, values = _run(session, session.learner, seed, T.correct_images, T.correct_batch,
                     "build_pipeline(seed, n, batch_size, actors)")
    pool = sorted(set(grader.kit.map_workers(pid, what="reading Ray's actor table",
                                             timeout_s=30)) - before)
    batches = grader.kit.pool_batches(pool, what="reading Ray's task records", timeout_s=30)
    return PoolRun(_wrong(values, seed, T.correct_images), len(pool), batches)


@register(LAB, "pipeline-correct")
def pipeline_correct(session):
    """Every image of the grader's seeded set, processed right, in order."""
    run = session.memo(measure_pool, lambda: measure_pool(session))
    if run.wrong:
        raise AssertionError(run.wrong)


@register(LAB, "pipeline-actor-pool")
def pipeline_actor_pool(session):
    """The model runs in a pool of ``actors`` replicas (Ray's actor table), not a task per batch."""
    run = session.memo(measure_pool, lambda: measure_pool(session))
    if run.actors == T.pool_actors and not run.batches:
        raise AssertionError(f"Ray's actor table shows {run.actors} actors named like Ray Data's pool (MapWorker) "
                             "for your job, but Ray's task records show none of them processed a batch")
    if run.actors != T.pool_actors:
        raise AssertionError(
            f"asked for {T.pool_actors} model replicas, Ray's actor table shows {run.actors} pool actors "
            "(MapWorker) of your job: put the model in a callable class and pass "
            "compute=ray.data.ActorPoolStrategy(size=actors) to map_batches (a function loads the model per batch)")


@dataclass
class Throughput:
    ratio: float
    wrong: str | None = None
    rounds: int = 0  # interleaved rounds timed (fewer than T.rounds once the tiers' verdicts were decided)


def measure_throughput(session: Session) -> Throughput:
    """The learner's pipeline vs the reference's, interleaved, fresh seeds every round. A pipeline
    whose correctness run (:func:`measure_pool`) was wrong or ran no pool is not timed: every round
    of it would count as 0, and the reference (with its own Ray, graded sandboxed) need not start."""
    pool = session.memo(measure_pool, lambda: measure_pool(session))
    if pool.wrong or not (pool.actors and pool.batches):
        return Throughput(0.0, pool.wrong or "the run started no actor pool that processed a batch")
    rng, grader, pid = session.rng(2), session.ray_of(session.learner), _driver_pid(session)
    problems: list[str] = []

    def side(who, what: str, check: bool):
        def one() -> float:
            seed = rng.randrange(10_000_000)
            before = set(grader.kit.map_workers(pid, what="reading Ray's actor table",
                                             timeout_s=30)) if check else set()
            seconds, values = _run(session, who, seed, T.throughput_images, T.throughput_batch, what)
            if check:
                pool = sorted(set(grader.kit.map_workers(pid, what="reading Ray's actor table", timeout_s=30)) - before)
                worked = pool and grader.kit.pool_batches(pool, what="reading Ray's task records", timeout_s=30)
                # which images are checked is drawn after the run, from the grader's own stream
                ids = sorted(rng.sample(range(T.throughput_images), T.throughput_checked))
                why = _wrong(values, seed, T.throughput_images, ids) or (None if worked else "the run started no actor pool "
                                                                    "that processed a batch")
                if why:
                    problems.append(why)
                    return float("inf")
            return seconds
        return one

    # Counted beyond start-up: in every round each side runs T.startup_images images, then
    # T.throughput_images, and its seconds are the difference -- the work of the extra images, not
    # the pool's and Ray Data's start-up that both pay (counted whole, half-speed work read
    # 0.62-0.91x; a start-up timed once, apart from the rounds, misread the load around them:
    # the reference against itself read 0.20x under a load average of ~50 on 2 cores). The answer
    # is the lower of that ratio and the ratio of whole runs: a pipeline that makes its short
    # runs slow gains nothing.
    what = "build_pipeline(seed, n, batch_size, actors)"
    whole: dict[str, list[float]] = {"mine": [], "theirs": []}

    def beyond(who, label: str, one, key: str):
        def run() -> float:
            small = _run(session, who, rng.randrange(10_000_000), T.startup_images, T.throughput_batch, label)[0]
            seconds = one()
            whole[key].append(seconds)
            return max(seconds - small, 0.05 * seconds)
        return run

    def whole_ratios() -> list[float]:
        """The per-round ratios of whole runs, the warm-up round left out (when there are others)."""
        pairs = list(zip(whole["mine"], whole["theirs"]))
        return [b / a for a, b in (pairs[1:] or pairs)]

    mine = beyond(session.learner, what, side(session.learner, what, True), "mine")
    theirs = beyond(session.reference, "the reference pipeline", side(session.reference, "the reference pipeline", False), "theirs")
    # graded: the lower of the two medians, so the rounds end early only once both are decided
    timed = session.side_by_side(mine, theirs, rounds=T.rounds, stop_below=T.throughput_tiers[0] / 2,
                                 tiers=T.throughput_tiers, also_graded=whole_ratios)
    whole_ratio = statistics.median(whole_ratios()) if whole_ratios() else timed.ratio
    return Throughput(min(timed.ratio, whole_ratio), problems[0] if problems else None, len(timed.ratios))


tiers(LAB, ("pipeline-throughput-tier1", "pipeline-throughput-tier2"), T.throughput_tiers,
      measure_throughput,
      lambda r, need: (f"{r.wrong}; a round with wrong results or without an actor pool counts as 0" if r.wrong else
                       f"your pipeline ran at {r.ratio:.2f}x the reference pipeline's images/s (median of "
                       f"{r.rounds} interleaved rounds of {T.throughput_images} images, each counted beyond a run of "
                       f"{T.startup_images} just before it, or of whole runs if lower); this tier needs {need:.2f}x"))
