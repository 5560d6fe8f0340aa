"""Checks for 01_actor_scaling: the learner's image actor, pipelined driver and scaling model.

All grader-side (see :mod:`autograder.checks`). The grader owns the lab's Ray: a process of its
own starts it, and the learner's kernel joins it; the reference process runs in a Ray of its
own, out of the kernel's sight (the lab's spec: ``reference_ray``). Learner and reference are
driven alike -- the same kit steps (:mod:`autograder.kernel.routines`) in the kernel and in the
reference process, each on its own Ray -- and timed side by side, interleaved, on the grader's clock:

* the learner's ``ImageWorker`` processes seeded batches (checksums against the grader's
  own computation), counts its images, and its throughput is compared with the reference
  actor's on fresh batches every round (nothing can be cached);
* the learner's ``run_pool(actors, batches)`` drives the grader's *armed* emulated GPUs
  (:func:`autograder.labs.lab01.instruments.armed`: a sleep of known length standing in for a
  kernel). They run only jobs the grader sealed and answer with receipts no driver can forge,
  so correct results prove every job ran for its full time, and the grader knows how many GPUs
  were busy on average -- about 1 for a driver that calls ``ray.get`` in a loop;
* the learner's ``fit_overhead`` must recover seeded overheads from synthetic data, is then
  fitted to the grader's own trivial-call sweep of the learner's driver, and
  ``predict_throughput`` must predict the driver's measured rate at two kernel durations.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from course import fleet, kernels

from . import LAB
from .instruments import receipt, seal
from .targets import TARGETS as T
from ...transport import Learner, named, stashed
from ...checks import register, tiers

if TYPE_CHECKING:
    from ...grader.session.session import Session

ANTI_PATTERN = ("this is the 'ray.get in a loop' anti-pattern (Ray docs: \"Calling ray.get in a loop "
                "harms parallelism\"): submit work to every actor first, then collect results as they "
                "finish with ray.wait")


def _seeds(session: Session, salt: int, count: int) -> list[int]:
    rng = session.rng(salt)
    return [rng.randrange(10_000_000) for _ in range(count)]


# ---------------------------------------------------------------------------- the actor

def _check_images(got: list, specs: list, what: str) -> None:
    """Per-image results for seeded batches ``[(seed, n), ...]``, against the grader's checksums."""
    for out, (seed, n) in zip(got, specs):
        if out["shape"] != [n] or not kernels.matches(out["data"], kernels.reference_checksum(n, seed)):
            raise AssertionError(
                f"{what} gave a wrong result for a batch of {n} images (seed {seed}): expected {n} "
                f"values matching kernels.process(batch) (checksum), got shape {tuple(out['shape'])}")
    if len(got) != len(specs):
        raise AssertionError(f"{what}: {len(got)} results for {len(specs)} batches")


class Worker:
    """One actor of a side's ``ImageWorker`` class, driven by the kit's steps on that side."""

    def __init__(self, side: Learner, tag: str, timeout_s: float):
        self.side, self.tag, self.timeout_s = side, tag, timeout_s
        side.kit.actors(named("ImageWorker"), 1, what="starting ImageWorker as a Ray actor",
                        keep=f"{tag}.worker", timeout_s=T.start_timeout_s)

    def load(self, specs: list) -> None:
        """Put seeded batches in the object store (not timed)."""
        self.side.kit.batches(specs, what="making the grader's batches", keep=f"{self.tag}.batches",
                              timeout_s=self.timeout_s)

    def process(self, specs: list) -> float:
        """Seconds (grader's clock) for the actor to process the loaded batches; results checked."""
        seconds, got = self.side.kit.process_all.timed(stashed(f"{self.tag}.worker"), stashed(f"{self.tag}.batches"),
                                                       what="ImageWorker.process(batch)", returns="arrays",
                                                       timeout_s=self.timeout_s)
        _check_images(got, specs, "ImageWorker.process")
        return seconds

    def ran(self, grader: Learner, method: str, at_least: int) -> int:
        """How many ``method`` calls Ray's task records show this actor's own process finished
        (read by ``grader``, the grader's process on this side's Ray: :meth:`Session.ray_of`)."""
        actor = self.side.kit.actor_id(stashed(f"{self.tag}.worker"), what="the actor's id", timeout_s=self.timeout_s)
        return grader.kit.tasks_run(actor, method, at_least, what="reading Ray's task records", timeout_s=30)

    def count(self) -> int:
        return self.side.kit.method(stashed(f"{self.tag}.worker"), "images_processed",
                                    what="ImageWorker.images_processed()", returns="integers",
                                    timeout_s=self.timeout_s)[0]

    def release(self) -> None:
        self.side.kit.release(stashed(f"{self.tag}.worker"), what="releasing the actor",
                              timeout_s=self.timeout_s)


@dataclass
class WorkerRun:
    """The learner's actor: right results?, its count vs the images sent, and its speed."""

    wrong: str | None
    count: int | None
    expected: int
    ratio: float | None = None


def measure_worker(session: Session) -> WorkerRun:
    """Correctness and state on one learner actor; throughput on a fresh learner actor and a
    fresh reference actor started the same way, on fresh seeded batches every round."""
    rng = session.rng(1)
    sizes = [1, rng.randint(5, 40), T.worker_batch_size]
    specs = list(zip(_seeds(session, 2, 3), sizes))
    mine = Worker(session.learner, "learner", session.call_timeout_s)
    try:
        mine.load(specs)
        try:
            mine.process(specs)
        except AssertionError as exc:
            return WorkerRun(str(exc), None, sum(sizes))
        ran = mine.ran(session.ray_of(session.learner), "process", len(specs))
        if ran < len(specs):
            return WorkerRun(f"Ray's task records show {ran} process() calls finished in your ImageWorker "
                             f"actor's own process for the grader's {len(specs)} batches: the results were "
                             "not all computed by the actor", None, sum(sizes))
        try:
            count = mine.count()
        except AssertionError:
            count = None
    finally:
        mine.release()
    run = WorkerRun(None, count, sum(sizes))
    mine = Worker(session.learner, "learner", session.call_timeout_s)
    ref = Worker(session.reference, "reference", session.call_timeout_s)
    seeds = iter(_seeds(session, 3, 2 * (T.worker_rounds + 1)))

    def round_of(worker: Worker):
        def go() -> float:
            base = next(seeds)
            batch_specs = [(base * 100 + i, T.worker_batch_size) for i in range(T.worker_batches)]
            worker.load(batch_specs)
            return worker.process(batch_specs)
        return go

    try:
        run.ratio = session.side_by_side(round_of(mine), round_of(ref), rounds=T.worker_rounds,
                                         stop_below=T.worker_tiers[0] / 2, tiers=T.worker_tiers).ratio
    finally:
        mine.release()
        ref.release()
    return run


def _worker(session: Session) -> WorkerRun:
    return session.memo(measure_worker, lambda: measure_worker(session))


@register(LAB, "worker-correct")
def worker_correct(session):
    """The learner's actor returns the kernel's per-image results for seeded batches."""
    run = _worker(session)
    if run.wrong:
        raise AssertionError(run.wrong)


@register(LAB, "worker-state")
def worker_state(session):
    """The actor keeps state between calls: it counts every image it has processed."""
    run = _worker(session)
    if run.wrong:
        raise AssertionError(f"not checked while the results are wrong ({run.wrong})")
    if run.count is None:
        raise AssertionError("ImageWorker has no working images_processed() method")
    if run.count != run.expected:
        raise AssertionError(f"after the grader's calls (batches of {run.expected} images in all) "
                             f"images_processed() returned {run.count}: keep a running count in the actor")


def _worker_measured(session: Session) -> WorkerRun:
    run = _worker(session)
    if run.wrong:
        raise AssertionError(f"throughput is not credited while the results are wrong ({run.wrong})")
    return run


tiers(LAB, ("worker-tier1", "worker-tier2"), T.worker_tiers, _worker_measured,
      lambda r, need: (f"your actor processes images at {r.ratio:.2f}x the rate of the reference actor, "
                       f"measured side by side on {T.worker_batches} fresh batches of {T.worker_batch_size} "
                       f"per round; this tier needs {need:.2f}x (do one-off work such as warm-up in "
                       "__init__, not in every call)"))


# ---------------------------------------------------------------------------- the driver

class Fleet:
    """The grader's armed emulated GPUs, and sealed jobs for them (fresh tokens every call).

    One fleet per Ray, armed with the same key: the learner's driver gets the one on the lab's
    Ray, the reference's the one on its own Ray where it has one (:meth:`Session.ray_of`).
    """

    def __init__(self, session: Session):
        self.session = session
        self.n = fleet.size()
        self._handles: dict[int, list] = {}
        self._rng = session.rng(4)

    def handles(self, side: Learner, k: int | None = None) -> list:
        """Serialized handles of ``k`` (default: all) of the armed fleet on ``side``'s Ray, started
        as first needed: a driver first runs on one, so that a driver that cannot run at all never
        waits for the whole fleet to start."""
        grader, k = self.session.ray_of(side), self.n if k is None else k
        if len(self._handles.get(id(grader), ())) < k:
            got = grader.kit.armed_fleet(k, self.session.key.hex(), what="starting the grader's emulated GPUs",
                                         timeout_s=T.start_timeout_s)
            if len(got) != k:
                raise RuntimeError(f"the grader's fleet has {len(got)} emulated GPUs, not {k}")
            self._handles[id(grader)] = got
        return self._handles[id(grader)][:k]

    def jobs(self, count: int, seconds: float, jitter: float = 0.0) -> list[list]:
        """Sealed jobs ``[index, seconds, token, seal]`` with fresh tokens."""
        out = []
        for i in range(count):
            s = max(0.0, seconds + self._rng.uniform(-jitter, jitter)) if jitter else seconds
            token = self._rng.randrange(2**62)
            out.append([i, s, token, seal(self.session.key, token, s)])
        return out

    def drive(self, side: Learner, k: int, jobs: list, who: str = "run_pool") -> float:
        """Seconds (grader's clock) for ``side``'s ``run_pool`` to run ``jobs`` on ``k`` GPUs; checked."""
        seconds, got = side.timed("run_pool", {"handles": self.handles(side, k)}, {"jobs": jobs},
                                  what=f"{who}(actors, batches)", returns="integers",
                                  timeout_s=self.session.call_timeout_s)
        expected = [receipt(self.session.key, token) for _, _, token, _ in jobs]
        if got != expected:
            if sorted(got) == sorted(expected):
                why = "in a different order: return each batch's result at the batch's position"
            else:
                ran = len(set(got) & set(expected))
                why = (f"{len(got)} values, {ran} of them results of these batches: "
                       "return the actors' results themselves (ray.get them), one per batch")
            raise AssertionError(f"{who} returned the results of {len(jobs)} batches {why}")
        return seconds


def _fleet(session: Session) -> Fleet:
    return session.memo(Fleet, lambda: Fleet(session))


def ahead(session: Session):
    """What grading a submission with answers starts in the background while its kernel starts
    (:meth:`Session.prepare`): the reference process and its own Ray (about 10 s on 2 cores,
    mostly while the kernel's start leaves a core idle). Starting the grader's fleets then too
    gained nothing measurable: they compete with the notebook's own cells for the cores."""
    return lambda: session.reference


@dataclass
class DriverRun:
    n: int
    ratio: float
    busy: float  # emulated GPUs busy on average while the learner's driver ran


def measure_driver(session: Session) -> DriverRun:
    """A first run on one GPU, a warm-up with jittered short kernels on all, then the learner's
    driver vs the reference's on long kernels, interleaved; busy GPUs = the jobs' kernel time /
    the grader's wall time."""
    gpus = _fleet(session)
    gpus.drive(session.learner, 1, gpus.jobs(2, T.short_kernel_s))  # on one GPU first: the rest start only for a driver that runs
    gpus.drive(session.learner, gpus.n, gpus.jobs(3 * gpus.n + 1, T.short_kernel_s, jitter=T.short_kernel_s))
    count = T.driver_jobs_per_actor * gpus.n
    busy = []

    def learner() -> float:
        seconds = gpus.drive(session.learner, gpus.n, gpus.jobs(count, T.long_kernel_s))
        busy.append(count * T.long_kernel_s / seconds)
        return seconds

    def reference() -> float:
        return gpus.drive(session.reference, gpus.n, gpus.jobs(count, T.long_kernel_s), who="the reference run_pool")

    ratio = session.side_by_side(learner, reference, rounds=T.driver_rounds, stop_below=T.driver_tiers[0] / 2,
                                 tiers=T.driver_tiers).ratio
    return DriverRun(gpus.n, ratio, statistics.median(busy))


def _driver(session: Session) -> DriverRun:
    return session.memo(measure_driver, lambda: measure_driver(session))


@register(LAB, "driver-correct")
def driver_correct(session):
    """run_pool returns every batch's result, in batch order, each from a GPU that ran it."""
    _driver(session)


@register(LAB, "driver-concurrency", timed=True)
def driver_concurrency(session):
    """The driver keeps the fleet busy (the jobs' kernel time over the grader's wall time)."""
    run = _driver(session)
    if run.busy < T.min_busy_fraction * run.n:
        raise AssertionError(
            f"while run_pool drove {run.n} emulated GPUs ({T.long_kernel_s * 1e3:g} ms kernels), on average only "
            f"{run.busy:.1f} were busy (needs ≥ {T.min_busy_fraction * run.n:g}): {ANTI_PATTERN}")


tiers(LAB, ("driver-tier1", "driver-tier2"), T.driver_tiers, _driver,
      lambda r, need: (f"run_pool drives {r.n} emulated GPUs at {r.ratio:.2f}x the reference driver's rate, "
                       f"measured side by side ({T.long_kernel_s * 1e3:g} ms kernels, {r.busy:.1f} GPUs busy on "
                       f"average); this tier needs {need:.2f}x: "
                       + (ANTI_PATTERN if r.busy < T.min_busy_fraction * r.n else "keep every actor's queue non-empty")))


# ---------------------------------------------------------------------------- the model

def sweep_sizes(n: int) -> list[int]:
    """Actor counts of a sweep up to ``n``: 1, 2, 4, ... and ``n``."""
    out, k = [], 1
    while k < n:
        out.append(k)
        k *= 2
    return out + [n]


@dataclass
class Sweep:
    """The grader's sweep of the learner's driver: best trivial-call rates per N, and rates at
    both kernel durations on all N (calls/s; best over rounds -- noise only slows runs down)."""

    n: int
    sizes: list[int]
    trivial: list[float]
    rates: dict[float, float]


def measure_sweep(session: Session, side: Learner | None = None) -> Sweep:
    gpus = _fleet(session)
    side = side or session.learner
    n, sizes = gpus.n, sweep_sizes(gpus.n)
    gpus.handles(side)  # the whole fleet, started before the sweep
    trivial = {k: [] for k in sizes}
    short, long_ = [], []
    short_jobs = max(4 * n, int(n / T.short_kernel_s * 0.05))  # 0.05 s of work at perfect scaling
    long_jobs = T.driver_jobs_per_actor * n
    for _ in range(T.model_rounds):
        for k in sizes:
            trivial[k].append(T.trivial_calls / gpus.drive(side, k, gpus.jobs(T.trivial_calls, 0.0)))
        short.append(short_jobs / gpus.drive(side, n, gpus.jobs(short_jobs, T.short_kernel_s)))
        long_.append(long_jobs / gpus.drive(side, n, gpus.jobs(long_jobs, T.long_kernel_s)))
    return Sweep(n, sizes, [max(trivial[k]) for k in sizes], {T.short_kernel_s: max(short), T.long_kernel_s: max(long_)})


def _positive(value: float, what: str) -> float:
    if not (math.isfinite(value) and value > 0):
        raise AssertionError(f"{what} returned {value!r}; expected a positive, finite number")
    return value


def _fit(session: Session, ns: list, rates: list) -> float:
    return _positive(session.learner.call("fit_overhead", ns, rates, what="fit_overhead(n_actors, throughputs)",
                                          returns="number"), "fit_overhead")


def _model(session: Session, t_kernel: float, salt: int) -> None:
    # 1. The fit must recover seeded overheads from synthetic data: one small, one large, so
    #    that no typed-in number can match both.
    rng = session.rng(salt)
    ns = [1, 2, 4, 8, 16]
    for low, high in ((0.0001, 0.0005), (0.002, 0.01)):
        true_o = rng.uniform(low, high)
        got = _fit(session, ns, [(1 + rng.uniform(-T.fit_noise, T.fit_noise)) / true_o for _ in ns])
        if abs(got / true_o - 1) > T.fit_tolerance:
            raise AssertionError(
                f"on synthetic trivial-call rates made with t_overhead = {true_o * 1e3:.3f} ms (about "
                f"{1 / true_o:,.0f} calls/s at every N), fit_overhead returned {got * 1e3:.3f} ms "
                f"(allowed ±{T.fit_tolerance:.0%}): fit the data it is given")
    # 2. Fit to the grader's trivial-call sweep of the learner's driver; predict; compare.
    sweep = session.memo(measure_sweep, lambda: measure_sweep(session))
    t_o = _fit(session, sweep.sizes, sweep.trivial)
    pred = _positive(session.learner.call("predict_throughput", sweep.n, t_kernel, t_o,
                                          what="predict_throughput(n_actors, t_kernel, t_overhead)",
                                          returns="number"), "predict_throughput")
    measured = sweep.rates[t_kernel]
    ratio = measured / pred
    low, high = T.model_band
    if not low <= ratio <= high:
        why = (f"your driver reaches only {ratio:.2f}x of your own model: if the model is right, the driver "
               "is the bottleneck" if ratio < low else
               f"the driver does {ratio:.2f}x better than your model predicts: it is too pessimistic")
        raise AssertionError(
            f"{t_kernel * 1e3:g} ms kernels on {sweep.n} emulated GPUs: fitted on the grader's trivial-call sweep "
            f"(t_overhead = {t_o * 1e3:.3f} ms) your model predicts {pred:,.0f} calls/s, the grader measured "
            f"your run_pool at {measured:,.0f} calls/s (needs {low:g}–{high:g}x the prediction): {why}")


@register(LAB, "model-short-kernel", timed=True)
def model_short_kernel(session):
    """Model vs the grader's re-measurement at the short kernel (driver-bound regime)."""
    _model(session, T.short_kernel_s, 5)


@register(LAB, "model-long-kernel", timed=True)
def model_long_kernel(session):
    """Model vs the grader's re-measurement at the long kernel (GPU-bound regime)."""
    _model(session, T.long_kernel_s, 6)


def calibrate(session: Session) -> list[str]:
    """The reference model against the reference fleet's measured sweep (the tiers are in
    calibrate's table)."""
    fleet.start()
    sweep = measure_sweep(session, session.reference)
    ref = session.answers()
    t_o = ref["fit_overhead"](sweep.sizes, sweep.trivial)
    lines = []
    lines.append(f"per-call overhead (trivial calls, fitted) {t_o * 1e3:.3f} ms; trivial rates "
                 + ", ".join(f"N={k}: {r:,.0f}/s" for k, r in zip(sweep.sizes, sweep.trivial)))
    for t_k, r in sweep.rates.items():
        pred = ref["predict_throughput"](sweep.n, t_k, t_o)
        lines.append(f"{t_k * 1e3:g} ms on {sweep.n}: measured {r:,.0f}/s, model {pred:,.0f}/s, ratio {r / pred:.2f} "
                     f"(band {T.model_band}); knee at N ≈ {t_k / t_o:.1f}")
    return lines
