"""Reference answers for 04_data_affinity: the three placements, shard lookup, device residency."""

from __future__ import annotations

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from course import kernels, locality

from ...degrade import at_half_speed


def shard_nodes(refs):
    """The nodes holding a copy of each object, from Ray's object directory."""
    found = ray.experimental.get_object_locations(list(refs))
    return [set(found.get(r, {}).get("node_ids") or []) for r in refs]


@ray.remote(num_cpus=1)
class Worker:
    """Processes whatever shard it is handed, on the node it lives on."""

    def run(self, batch):
        return locality.process(batch)


@ray.remote(num_cpus=1)
def process_shard(batch):
    """One shard, processed wherever Ray runs this task."""
    return locality.process(batch)


class NaiveJob:
    """(a) One actor per node, placed by Ray's default policy; shards dealt round-robin."""

    def __init__(self, nodes):
        self.workers = [Worker.remote() for _ in nodes]

    def run(self, shards):
        return ray.get([self.workers[i % len(self.workers)].run.remote(sh.ref) for i, sh in enumerate(shards)])


class TaskJob:
    """(b) One task per shard, its ObjectRef as the argument: Ray leases a worker where the bytes are."""

    def __init__(self, nodes):
        pass

    def run(self, shards):
        return ray.get([process_shard.remote(sh.ref) for sh in shards])


class PinnedJob:
    """(c) One actor pinned on each node; every shard goes to the actor on a node holding it."""

    def __init__(self, nodes):
        self.workers = {n: Worker.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote()
                        for n in nodes}

    def run(self, shards):
        refs = []
        for sh, nodes in zip(shards, shard_nodes([sh.ref for sh in shards])):
            node = next((n for n in sorted(nodes) if n in self.workers), None)
            worker = self.workers[node] if node else next(iter(self.workers.values()))
            refs.append(worker.run.remote(sh.ref))
        return ray.get(refs)


class ResidentWorker:
    """Copies its shard to the device once, then processes the resident copy on every call."""

    def __init__(self, batch):
        self.images = locality.to_device(batch)

    def run(self):
        return kernels.process(self.images)


def link_bytes_per_s(images_per_s, image_bytes, nodes, locality_fraction):
    """Bytes per second each node's link carries when a fraction of the bytes is processed remotely.

    The remote share of the input stream, split evenly over the nodes' links.
    """
    return images_per_s * image_bytes * (1.0 - locality_fraction) / nodes


class _HalfSpeedJob(PinnedJob):
    """The reference job at half its rate (it waits as long as it worked)."""

    run = at_half_speed(PinnedJob.run)


def degraded() -> dict:
    """The reference made half as fast on purpose, for ``python -m autograder calibrate``: a
    throughput tier this copy passes cannot tell good work from half-speed work on this machine."""
    return {**globals(), "PinnedJob": _HalfSpeedJob}
