"""A fleet of GPU actors, real or emulated, and the measurements that go with it.

* :func:`start` starts Ray with the fleet's resources: on a machine without a GPU, ``size()``
  *logical* GPUs (an accounting fiction: Ray hands them out, no device exists); on a GPU
  machine, the real GPUs plus ``size()`` units of the custom resource ``emulated_gpu``.
* :func:`start_actors` turns a plain class (or a ``@ray.remote`` class) into ``n`` actors
  that each own one device: ``num_gpus=1, num_cpus=0`` on a GPU or a logical GPU, or one CPU
  for a real kernel on a CPU-only machine.
* :class:`EmulatedGPU` is an actor standing in for one GPU: each call sleeps for the job's
  kernel duration (:func:`course.kernels.emulated`) -- a stand-in, not GPU work.
  :func:`emulated` keeps one such fleet per process for the lessons.

The grader's own fleet -- armed emulated GPUs that run only the jobs it sealed -- is not here but
with lab 01's grading (``autograder/labs/lab01/instruments.py``); it runs on
:data:`GRADER_RESOURCE`, which :func:`start` declares.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

from . import backend, bench, cluster, kernels

# Start worker processes as fast as the machine allows and keep the raylet from warning
# about "many worker processes" when a fleet of actors starts (each actor is one process).
# Read by the raylet when Ray starts, so it must be set before :func:`start`.
os.environ.setdefault("RAY_worker_maximum_startup_concurrency", "16")

import ray  # noqa: E402

EMULATED_RESOURCE = "emulated_gpu"  # the emulated fleet's resource on a machine with real GPUs
MAX_SIZE = 16                       # logical GPUs per machine, at most
GRADER_RESOURCE = "autograder_gpu"  # a grader's emulated GPUs, apart from the ones a notebook holds
# Two identical actors differed 2x in 2 of 8 runs when glibc adapted its malloc thresholds
# to each process's history (see course.bench.steady_allocator). Actors that are measured
# against each other get fixed thresholds through their environment, so the comparison
# measures the code, not the allocator.
STEADY_ALLOCATOR = {"MALLOC_MMAP_THRESHOLD_": str(bench.MMAP_THRESHOLD), "MALLOC_TRIM_THRESHOLD_": str(bench.TRIM_THRESHOLD)}


def size() -> int:
    """How many emulated GPUs this machine hosts: 4 per CPU core, between 4 and 16.

    Each emulated GPU is an actor, i.e. a Python process; on 2 cores that is 8.
    """
    return max(4, min(MAX_SIZE, 4 * (os.cpu_count() or 1)))


def real_devices() -> int:
    """Devices a real kernel can run on: GPUs with CuPy, else CPU cores."""
    if backend.on_gpu():
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    return os.cpu_count() or 1


def start(n_emulated: int | None = None) -> cluster.ClusterInfo:
    """Start (or join) Ray with a fleet of ``n_emulated`` emulated GPUs (default :func:`size`)."""
    n = n_emulated or size()
    if backend.on_gpu():
        return cluster.start(num_gpus=real_devices(), resources={EMULATED_RESOURCE: n, GRADER_RESOURCE: n})
    return cluster.start(num_gpus=n, resources={GRADER_RESOURCE: n})


def emulated_options() -> dict:
    """Actor options for one emulated GPU: one logical GPU (or ``emulated_gpu``), no CPU."""
    if backend.on_gpu():
        return {"num_cpus": 0, "num_gpus": 0, "resources": {EMULATED_RESOURCE: 1}}
    return {"num_cpus": 0, "num_gpus": 1}


def device_options(*, reserve: bool = True) -> dict:
    """Actor options for a real kernel: one GPU with CuPy, one CPU core with NumPy.

    ``reserve=False`` asks for (almost) nothing, so actors a notebook left running cannot
    keep these from starting, and runs the actor with :data:`STEADY_ALLOCATOR`; the grader
    uses it, and measures one actor at a time.
    """
    steady = {} if reserve else {"runtime_env": {"env_vars": STEADY_ALLOCATOR}}
    if backend.on_gpu():
        return {"num_cpus": 0, "num_gpus": 1 if reserve else 0.01, **steady}
    return {"num_cpus": 1 if reserve else 0, "num_gpus": 0, **steady}


def start_actors(cls, n: int, *args, options: dict | None = None, timeout_s: float = 120.0,
                 **kwargs) -> list:
    """``n`` actors of ``cls`` (plain or ``@ray.remote``), started and ready.

    ``options`` defaults to :func:`device_options`. Raises ``TimeoutError`` when they cannot
    start in ``timeout_s`` seconds (usually: other actors hold the resources they need).
    """
    actor_cls = cls if hasattr(cls, "options") and hasattr(cls, "remote") else ray.remote(cls)
    opts = device_options() if options is None else options
    actors = [actor_cls.options(**opts).remote(*args, **kwargs) for _ in range(n)]
    ready, pending = ray.wait([a.__ray_ready__.remote() for a in actors], num_returns=n, timeout=timeout_s)
    if pending:
        release(actors)
        raise TimeoutError(f"{len(pending)} of {n} actors did not start within {timeout_s:g} s "
                           f"(they need {opts}; free resources: {ray.available_resources()})")
    ray.get(ready)  # raises if a constructor failed
    return actors


def release(actors) -> None:
    """Kill actors and give their resources back (and forget them if they were the fleet)."""
    global _fleet
    for a in actors:
        try:
            ray.kill(a)
        except Exception:
            pass
    ids = {a._actor_id for a in actors}
    if _fleet is not None and any(a._actor_id in ids for a in _fleet):
        _fleet = None


@dataclass(frozen=True)
class Job:
    """One call's worth of work for an emulated GPU: sleep ``seconds``, return ``token``.

    ``seal`` is empty for the jobs a lesson makes; a grader's jobs carry one
    (``autograder.labs.lab01.instruments.seal``).
    """

    index: int
    seconds: float
    token: int
    seal: str = ""


def jobs(count: int, seconds: float, seed: int = 0, *, jitter: float = 0.0) -> list[Job]:
    """``count`` jobs of ``seconds`` each (± ``jitter`` seconds, seeded), with seeded tokens."""
    rng = random.Random(seed)
    return [Job(i, max(0.0, seconds + rng.uniform(-jitter, jitter)), rng.randrange(2**31))
            for i in range(count)]


class EmulatedGPU:
    """One emulated GPU: ``process(job)`` sleeps the job's kernel time and returns its token.

    The sleep is :func:`course.kernels.emulated` -- it stands in for a kernel of known
    duration and uses no compute, so a fleet of them fits on a laptop.
    """

    def __init__(self):
        self._kernels: dict[float, object] = {}

    def _sleep(self, seconds: float) -> None:
        kernel = self._kernels.get(seconds)
        if kernel is None:
            kernel = self._kernels[seconds] = kernels.emulated(seconds)
        if seconds > 0:
            kernel()

    def process(self, job):
        self._sleep(job.seconds)
        return job.token


_fleet: list | None = None  # this process's emulated fleet (lessons)


def emulated(n: int | None = None, *, timeout_s: float = 120.0) -> list:
    """This process's fleet of emulated GPUs (the first ``n``; started on first use, then kept)."""
    global _fleet
    want = n or size()
    if _fleet is not None and len(_fleet) >= want:
        try:
            ray.get([a.__ray_ready__.remote() for a in _fleet], timeout=timeout_s)
            return _fleet[:want]
        except Exception:  # an actor died, or Ray restarted: start again
            _fleet = None
    _fleet = start_actors(EmulatedGPU, max(want, size()), options=emulated_options(), timeout_s=timeout_s)
    return _fleet[:want]

