"""Reference answers for 01_actor_scaling: an image actor, a pipelined driver, a scaling model."""

from __future__ import annotations

import numpy as np
import ray

from course import backend, kernels

from ...degrade import at_half_speed


class ImageWorker:
    """One device's worth of the image workload, kept warm between calls.

    The constructor pays the one-off costs (on a GPU: compiling the CUDA kernel, filling
    CuPy's memory pool) once; every call then only moves the batch and runs the kernel.
    """

    def __init__(self):
        self.images = 0
        kernels.process(kernels.make_batch(8))  # warm-up: compile, allocate
        backend.sync()

    def process(self, batch):
        """Per-image results (NumPy float32) for a (n, h, w) uint8 batch."""
        out = backend.to_host(kernels.process(backend.to_device(batch)))
        self.images += len(batch)
        return out

    def images_processed(self):
        return self.images


def run_pool(actors, batches, depth=2):
    """Results of ``actor.process(batch)`` for every batch, in batch order.

    Pipelined: every actor always has ``depth`` calls queued, and ``ray.wait`` hands the
    next batch to whichever actor finished first -- the driver never blocks on one call.
    """
    results = [None] * len(batches)
    pending = {}
    todo = iter(enumerate(batches))

    def submit(actor):
        for i, batch in todo:
            pending[actor.process.remote(batch)] = (i, actor)
            return

    for _ in range(depth):
        for actor in actors:
            submit(actor)
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        i, actor = pending.pop(done[0])
        results[i] = ray.get(done[0])
        submit(actor)
    return results


def predict_throughput(n_actors, t_kernel, t_overhead):
    """Calls per second of ``n_actors`` actors running kernels of ``t_kernel`` seconds, when
    every call also costs ``t_overhead`` seconds of serial work (the driver submitting and
    collecting it, the actor receiving and answering it) that does not overlap the kernels.

    A round of one call per actor then takes ``t_kernel + n_actors * t_overhead``: linear in
    ``n_actors`` while the kernels dominate, flattening towards ``1 / t_overhead`` once the
    overhead does. The knee (half the ideal linear rate) is at ``n_actors = t_kernel / t_overhead``.
    """
    return n_actors / (t_kernel + n_actors * t_overhead)


def fit_overhead(n_actors, throughputs):
    """The per-call overhead (s) that best fits throughputs (calls/s) of trivial calls
    (``t_kernel = 0``) measured with ``n_actors`` actors.

    With no kernel the model is ``1 / t_overhead`` at every N, and the least-squares fit of
    log throughput is the geometric mean of the per-point ``1 / throughput``.
    """
    return float(np.exp(np.mean(np.log(1.0 / np.asarray(throughputs, dtype=float)))))


class _HalfSpeedWorker(ImageWorker):
    """The reference actor at half its rate (it waits as long as it worked)."""

    process = at_half_speed(ImageWorker.process)


def degraded() -> dict:
    """The reference made half as fast on purpose, for ``python -m autograder calibrate``: an
    actor that waits as long as it worked, and a driver that feeds only half the actors. A tier
    this copy passes cannot tell good work from half-speed work on this machine."""

    def half_pool(actors, batches, depth=2):
        return run_pool(list(actors)[:max(1, len(actors) // 2)], batches, depth)

    return {**globals(), "ImageWorker": _HalfSpeedWorker, "run_pool": half_pool}
