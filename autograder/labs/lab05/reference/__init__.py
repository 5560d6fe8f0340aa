"""Reference answers for 05_capstone: the sizing model and the Ray Data pipeline."""

from __future__ import annotations

import math

import ray
import ray.data

from course import pipeline


def scale(measured, image_px, fixed):
    """How a per-image rate measured at ``base_px`` moves to ``image_px``: a fraction ``fixed`` of
    an image's time does not depend on its pixels, the rest grows with px²."""
    return 1 / (fixed + (1 - fixed) * (image_px / measured["base_px"]) ** 2)


def per_gpu(measured, image_px, batch_size):
    """(images/s one GPU delivers at this batch size, actors per GPU, whether the per-call
    overhead leaves it idle even with the most actors allowed)."""
    rate = measured["kernel_images_per_s"][str(batch_size)] * scale(measured, image_px, measured["model_fixed_fraction"])
    busy = batch_size / rate                                      # GPU seconds per call
    need = math.ceil(1 + measured["call_overhead_s"] / busy)      # calls in flight that hide the overhead
    actors = min(need, measured["max_actors_per_gpu"])
    return min(rate, actors * batch_size / (measured["call_overhead_s"] + busy)), actors, need > actors


def cpu_rate(measured, image_px):
    """images/s one CPU worker decodes and resizes at this size."""
    return measured["cpu_images_per_s"] * scale(measured, image_px, measured["cpu_fixed_fraction"])


def node_capacity(measured, image_px, batch_size):
    """images/s one node can sustain, per resource: its GPUs (or their per-call overhead), its
    CPU workers decoding, its network link carrying the JPEGs; GPUs are discounted by their
    availability: each failure takes ``gpus_per_failure`` GPUs down for detection + restart."""
    gpu, _, starved = per_gpu(measured, image_px, batch_size)
    down = measured["failures_per_gpu_hour"] * measured["gpus_per_failure"] * (measured["detect_s"] + measured["restart_s"])
    up = 1 / (1 + down / 3600)  # MTBF / (MTBF + MTTR): never below 0, however many failures
    jpeg = measured["jpeg_bytes_fixed"] + measured["jpeg_bytes_per_pixel"] * image_px ** 2
    return {"overhead" if starved else "gpu": measured["gpus_per_node"] * gpu * up,
            "cpu": measured["cpus_per_node"] * cpu_rate(measured, image_px),
            "network": measured["link_bytes_per_s"] / jpeg}


def plan(target, image_px, measured):
    """GPUs, actors per GPU, batch size and CPU workers for ``target`` images/s, and the limit."""
    sizes = sorted(int(b) for b in measured["kernel_images_per_s"])
    batch = max(sizes, key=lambda b: (per_gpu(measured, image_px, b)[0], -b))
    gpu, actors, _ = per_gpu(measured, image_px, batch)
    node = node_capacity(measured, image_px, batch)
    limit = min(node, key=node.get)
    nodes = math.ceil(target / (node[limit] * measured["quota_share"]))
    return {"nodes": nodes, "gpus": nodes * measured["gpus_per_node"], "actors_per_gpu": actors,
            "batch_size": batch, "cpu_workers": math.ceil(target / cpu_rate(measured, image_px)),
            "limit": limit, "node": node, "gpu_images_per_s": gpu}


def build_pipeline(seed, n, batch_size, actors):
    """Generated JPEGs -> CPU decode and resize -> the network in a pool of ``actors`` model replicas."""
    return (pipeline.images(seed, n)
            .map_batches(pipeline.preprocess, batch_size=batch_size)
            .map_batches(pipeline.Model, batch_size=batch_size,
                         compute=ray.data.ActorPoolStrategy(size=actors), **pipeline.actor_options(actors)))


# ---------------------------------------------------------------- the degraded copy (calibrate)
# Half speed means every stage does its work twice. A sleep as long as the work (the other labs'
# `at_half_speed`) did not halve this pipeline: on a shared 2-core machine a sleeping replica
# hands its core to the other stages, and while the model was a 64x64 blur its work was a few
# per cent of a run (the rest: starting the pool, Ray Data's planning), so sleeping as long as it
# worked left the run ~0.95x as fast.

def _generate_again(batch: dict, seed: int) -> dict:
    pipeline.jpegs(seed, batch["id"])
    return batch


def _preprocess_twice(batch: dict) -> dict:
    pipeline.preprocess(batch)
    return pipeline.preprocess(batch)


class _ModelTwice(pipeline.Model):
    def __call__(self, batch: dict) -> dict:
        super().__call__(batch)
        return super().__call__(batch)


def degraded() -> dict:
    """The reference made slower on purpose, for ``python -m autograder calibrate``: every stage
    (generating the JPEGs, decoding them, the network) does its work twice."""

    def slow_pipeline(seed, n, batch_size, actors):  # build_pipeline, each stage doing its work twice
        return (pipeline.images(seed, n)
                .map_batches(_generate_again, fn_kwargs={"seed": int(seed)}, batch_size=None)
                .map_batches(_preprocess_twice, batch_size=batch_size)
                .map_batches(_ModelTwice, batch_size=batch_size,
                             compute=ray.data.ActorPoolStrategy(size=actors), **pipeline.actor_options(actors)))

    return {**globals(), "build_pipeline": slow_pipeline}
