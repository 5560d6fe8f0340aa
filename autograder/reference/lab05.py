"""Reference answers for 05_capstone: the sizing model and the Ray Data pipeline."""

from __future__ import annotations

import math

import ray
import ray.data

from course import pipeline

from . import at_half_speed

BASE_PX = 64  # the image side the measured kernel and preprocessing rates are for


def per_gpu(measured: dict, image_px: int, batch_size: int) -> tuple[float, int, bool]:
    """(images/s one GPU delivers at this batch size, actors per GPU, whether the per-call
    overhead leaves it idle even with the most actors allowed)."""
    rate = measured["kernel_images_per_s"][str(batch_size)] * (BASE_PX / image_px) ** 2
    busy = batch_size / rate                                      # GPU seconds per call
    need = math.ceil(1 + measured["call_overhead_s"] / busy)      # calls in flight that hide the overhead
    actors = min(need, measured["max_actors_per_gpu"])
    return min(rate, actors * batch_size / (measured["call_overhead_s"] + busy)), actors, need > actors


def node_capacity(measured: dict, image_px: int, batch_size: int) -> dict:
    """images/s one node can sustain, per resource: its GPUs (or their per-call overhead), its
    CPU workers preprocessing, its network link; GPUs are discounted for restarts."""
    scale = (BASE_PX / image_px) ** 2
    gpu, _, starved = per_gpu(measured, image_px, batch_size)
    up = 1 - measured["failures_per_gpu_hour"] * measured["restart_s"] / 3600
    return {"overhead" if starved else "gpu": measured["gpus_per_node"] * gpu * up,
            "cpu": measured["cpus_per_node"] * measured["cpu_images_per_s"] * scale,
            "network": measured["link_bytes_per_s"] / image_px ** 2}


def plan(target: float, image_px: int, measured: dict) -> dict:
    """GPUs, actors per GPU, batch size and CPU workers for ``target`` images/s, and the limit."""
    sizes = sorted(int(b) for b in measured["kernel_images_per_s"])
    batch = max(sizes, key=lambda b: (per_gpu(measured, image_px, b)[0], -b))
    node = node_capacity(measured, image_px, batch)
    limit = min(node, key=node.get)
    nodes = math.ceil(target / (node[limit] * measured["quota_share"]))
    cpu_rate = measured["cpu_images_per_s"] * (BASE_PX / image_px) ** 2
    return {"nodes": nodes, "gpus": nodes * measured["gpus_per_node"],
            "actors_per_gpu": per_gpu(measured, image_px, batch)[1], "batch_size": batch,
            "cpu_workers": math.ceil(target / cpu_rate), "limit": limit}


def build_pipeline(seed: int, n: int, batch_size: int, actors: int, model=pipeline.Model):
    """Generated images -> CPU crop -> the kernel in a pool of ``actors`` model replicas."""
    return (pipeline.images(seed, n)
            .map_batches(pipeline.preprocess, batch_size=batch_size)
            .map_batches(model, batch_size=batch_size, compute=ray.data.ActorPoolStrategy(size=actors),
                         **pipeline.actor_options(actors)))


class _HalfSpeedModel(pipeline.Model):
    __call__ = at_half_speed(pipeline.Model.__call__)


def degraded() -> dict:
    """The reference made slower on purpose, for ``python -m autograder calibrate``: replicas
    that wait as long as they worked after every batch."""

    def slow_pipeline(seed, n, batch_size, actors):
        return build_pipeline(seed, n, batch_size, actors, model=_HalfSpeedModel)

    return {**globals(), "build_pipeline": slow_pipeline}
