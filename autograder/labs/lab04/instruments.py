"""04_data_affinity's instruments (see :mod:`autograder.labs.instruments`): the grader's dataset
and host batch.

While grading, the dataset is the grader's: a :class:`ShardStore` makes and owns the shards
(:func:`course.locality.produce`) and hands them out without their seeds. The host batch a
learner's resident worker copies to the device is served by a :class:`BatchSource` that counts
every read, through a :class:`HostBatch` (an array to NumPy, so :func:`course.locality.to_device`
and the kernels read it like any host batch).
"""

from __future__ import annotations

import hmac
from dataclasses import replace

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from course import kernels, locality

from ..instruments import ClosedActor


def _signed(key: bytes, given: str) -> None:
    if not hmac.compare_digest(bytes.fromhex(str(given)), key):
        raise PermissionError("only the grader that made this store may change it")


@ray.remote(num_cpus=0, max_restarts=0)
class ShardStore(ClosedActor):
    """A grader's dataset: seeded shards it produces and owns, and hands out without their seeds.

    Learner code gets the shards (``shards(name)``) and may read their bytes wherever it
    likes; only the holder of ``key`` makes, copies and drops them. The store is the owner
    of every shard, so Ray's object directory for them is the store's (``locations``). A
    :class:`~autograder.labs.instruments.ClosedActor`: no ``__ray_call__`` to reach its seeds with.
    """

    def __init__(self, key_hex: str):
        self._key = bytes.fromhex(key_hex)
        self._sets: dict[str, list[locality.Shard]] = {}

    def make(self, key_hex: str, name: str, placement: list, seeds: list, images: int) -> None:
        """Shards ``name``: one per node of ``placement``, the i-th with ``seeds[i]``, made and waited for."""
        _signed(self._key, key_hex)
        self._sets[str(name)] = locality.produce(list(placement), [int(x) for x in seeds], int(images))

    def shards(self, name: str) -> list[locality.Shard]:
        return [replace(sh, seed=None) for sh in self._sets[str(name)]]

    def locations(self, name: str) -> list[list[str]]:
        return [sorted(n) for n in locality.locations([sh.ref for sh in self._sets[str(name)]])]

    def copy_to(self, key_hex: str, name: str, index: int, node: str) -> None:
        """A second copy of one shard, on ``node`` (a task there reads it)."""
        _signed(self._key, key_hex)
        pull = _touch.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
        ray.get(pull.remote(self._sets[str(name)][int(index)].ref))

    def drop(self, key_hex: str, name: str) -> None:
        _signed(self._key, key_hex)
        self._sets.pop(str(name), None)


@ray.remote(num_cpus=0)
def _touch(batch) -> int:
    return len(batch)


def shard_store(key: bytes):
    """A :class:`ShardStore` on the head node (the node this driver runs on), ready."""
    store = ShardStore.options(scheduling_strategy=NodeAffinitySchedulingStrategy(locality.here(), soft=False)).remote(
        key.hex())
    ray.get(store.__ray_ready__.remote())
    return store


@ray.remote(num_cpus=0, max_restarts=0)
class BatchSource(ClosedActor):
    """A grader's host batch: seeded images it serves, counting every read (``reads``)."""

    def __init__(self, images: int, seed: int):
        self._batch = kernels.make_batch(int(images), seed=int(seed), device=False)
        self._reads = 0

    def read(self):
        self._reads += 1
        return self._batch

    def reads(self) -> int:
        return self._reads


class HostBatch:
    """A batch in host memory that a grader serves (:class:`BatchSource`): each read of its
    bytes -- :func:`course.locality.to_device`, ``np.asarray`` -- is one copy the grader counts."""

    def __init__(self, source, images: int):
        self._source, self.images = source, int(images)

    def read(self) -> np.ndarray:
        return ray.get(self._source.read.remote())

    def __array__(self, dtype=None, copy=None):
        host = self.read()
        return host if dtype is None else host.astype(dtype)

    def __len__(self) -> int:
        return self.images
