"""04_data_affinity's kit steps (:mod:`autograder.kernel.routines`): the grader's emulated cluster,
shard store and host batch (:mod:`.instruments`), made by the grader's process on a side's cluster
(:meth:`Session.ray_of <autograder.grader.session.session.Session.ray_of>`); the learner's jobs, shard
lookup and resident worker driven alike on both sides. Imported by both; they decide nothing (the checks do)."""

from __future__ import annotations

from course import locality

from ...kernel.routines import export, step
from ...kernel.stash import STASH
from . import instruments


# ---------------------------------------------------------------- kit steps

@step
def emulated_cluster() -> None:
    """The grader's process: the lab's emulated multi-node cluster (the kernel joins it), or the
    reference's own."""
    locality.start()


@step
def node_ids() -> list[str]:
    """The cluster's node ids, head first."""
    return locality.start()


@step
def shard_store(key_hex: str) -> str:
    """Grader's side: the grader's shard store, as a handle to forward."""
    store = instruments.shard_store(bytes.fromhex(key_hex))
    STASH.held.setdefault("lab04", []).append(store)
    return export(store)


@step
def produce(store, key_hex: str, name: str, placement: list, seeds: list, images: int) -> None:
    """Grader's side: shards ``name`` in the store."""
    import ray

    ray.get(store.make.remote(key_hex, name, placement, seeds, images))


@step
def observe(store, name: str) -> dict:
    """Grader's side: who holds each shard of ``name``, and the bytes each object store has written."""
    import ray

    return {"holders": ray.get(store.locations.remote(name)), "written": locality.store_bytes()}


@step
def copy_shard(store, key_hex: str, name: str, index: int, node: str) -> None:
    import ray

    ray.get(store.copy_to.remote(key_hex, name, index, node))


@step
def drop(store, key_hex: str, name: str) -> None:
    import ray

    ray.get(store.drop.remote(key_hex, name))


@step
def make_job(cls, nodes: list):
    """A job of class ``cls`` on ``nodes`` (kept on its side by the request)."""
    locality.start()
    return cls(list(nodes))


@step
def run_job(job, store, name: str) -> list:
    """``job.run(shards)`` on the store's shards ``name``; each result as digest and per-image means."""
    import numpy as np
    import ray

    locality.start()
    shards = ray.get(store.shards.remote(name))
    results = job.run(shards)
    out = []
    for r in list(results) if results is not None else []:
        if isinstance(r, locality.Processed):
            out.append({"digest": str(r.digest), "means": np.asarray(r.means, dtype=float).ravel().tolist()})
        else:
            out.append({"type": type(r).__name__})
    return out


@step
def ask_shard_nodes(fn, store, name: str) -> list:
    """The learner's ``shard_nodes(refs)`` on the store's shards, as sorted lists of node ids."""
    import ray

    refs = [sh.ref for sh in ray.get(store.shards.remote(name))]
    got = fn(refs)
    try:
        return [sorted(str(n) for n in g) for g in got]
    except TypeError:
        raise AssertionError(f"shard_nodes returned {type(got).__name__}; expected one collection of "
                             "node ids per ref") from None


@step
def batch_source(images: int, seed: int) -> str:
    """Grader's side: a grader-served host batch, as a handle to forward."""
    locality.start()
    source = instruments.BatchSource.remote(images, seed)
    STASH.held.setdefault("lab04", []).append(source)
    return export(source)


@step
def resident(cls, source, images: int, calls: int) -> list:
    """A ``cls`` worker built on the grader's host batch, and its ``run()`` results ``calls`` times."""
    from course import backend

    worker = cls(instruments.HostBatch(source, images))
    return [backend.to_host(worker.run()) for _ in range(int(calls))]


@step
def reads(source) -> int:
    """Grader's side: how often the host batch's bytes were read."""
    import ray

    return ray.get(source.reads.remote())
