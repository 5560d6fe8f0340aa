"""The capstone's offline batch-inference pipeline, in pieces a Ray Data job is built from.

Ray's docs recommend Ray Data for offline batch inference (docs.ray.io, "End-to-end: Offline
Batch Inference"): a dataset streams through CPU preprocessing (``map_batches`` with a function:
stateless Ray tasks) into a pool of model replicas on GPUs (``map_batches`` with a callable
class and ``compute=ray.data.ActorPoolStrategy``: stateful actors, each constructed once; the
``ray.data.Dataset.map_batches`` reference, "Stateful Transforms"). The pieces here are the course's, so every lab's
numbers compare:

* :func:`images` -- a dataset of ``n`` generated images (no download): image ``i`` of seed
  ``s`` is the same wherever and however it is generated, so the grader knows every result.
* :func:`preprocess` -- the CPU stage: a centre crop of the raw :data:`RAW_PX` images to the
  kernel's :data:`course.kernels.IMAGE_SIZE` (a stand-in for decoding and resizing).
* :class:`Model` -- the GPU stage: the course's image kernel (:func:`course.kernels.process`,
  CuPy on a GPU). Constructing it "loads the model": a sleep of :data:`LOAD_S` stands in for
  reading weights (the kernel has none), which is why a replica should live in an actor.
* :func:`values` -- what a run produced, in image order; :func:`expected` -- the same computed
  on the host from the seed alone (what the grader compares with).
"""

from __future__ import annotations

import logging
import time

import numpy as np

from . import backend, kernels

RAW_PX = 72          # generated images are RAW_PX x RAW_PX; preprocessing crops the kernel's size
LOAD_S = 0.5         # a sleep standing in for loading a model's weights, once per replica
DEFAULT_IMAGES = 2048


def quiet() -> None:
    """Ray Data without progress bars or per-run log lines (a graded cell must not write to stderr)."""
    import ray.data

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    ctx.verbose_stats_logs = False
    for name in ("ray.data", "ray.data._internal.execution.streaming_executor"):
        logging.getLogger(name).setLevel(logging.ERROR)


def raw(seed: int, ids: np.ndarray) -> np.ndarray:
    """Raw images for ``ids``: each one seeded by (seed, id), so blocks can be made anywhere."""
    ids = np.asarray(ids, dtype=np.int64)
    out = np.empty((len(ids), RAW_PX, RAW_PX), dtype=np.uint8)
    for k, i in enumerate(ids):
        out[k] = np.random.default_rng([int(seed), int(i)]).integers(0, 256, (RAW_PX, RAW_PX), dtype=np.uint8)
    return out


def _generate(batch: dict, seed: int) -> dict:
    ids = np.asarray(batch["id"], dtype=np.int64)
    return {"id": ids, "image": raw(seed, ids)}


def images(seed: int, n: int = DEFAULT_IMAGES, *, blocks: int = 8):
    """A Ray Data dataset of ``n`` generated raw images (columns ``id``, ``image``), in ``blocks`` blocks."""
    import ray.data

    quiet()
    return ray.data.range(int(n), override_num_blocks=int(blocks)).map_batches(
        _generate, fn_kwargs={"seed": int(seed)}, batch_size=None)


def crop(raw: np.ndarray) -> np.ndarray:
    """The centre :data:`course.kernels.IMAGE_SIZE` square of each raw image."""
    lo = (raw.shape[-1] - kernels.IMAGE_SIZE) // 2
    return np.ascontiguousarray(raw[:, lo:lo + kernels.IMAGE_SIZE, lo:lo + kernels.IMAGE_SIZE])


def preprocess(batch: dict) -> dict:
    """The CPU stage: crop each raw image to the kernel's size (keeps ``id``)."""
    return {"id": batch["id"], "image": crop(np.asarray(batch["image"]))}


class Model:
    """One model replica: loading it takes :data:`LOAD_S` (a sleep standing in for reading
    weights), then each call runs the course kernel on a batch of preprocessed images."""

    def __init__(self):
        time.sleep(LOAD_S)
        self.loaded = True

    def __call__(self, batch: dict) -> dict:
        out = kernels.process(backend.to_device(np.asarray(batch["image"])))
        return {"id": batch["id"], "value": np.asarray(backend.to_host(out), dtype=np.float32)}


def actor_options(actors: int) -> dict:
    """Resources for one replica in a pool of ``actors``: a share of the real GPUs with CuPy;
    one *logical* GPU and no CPU otherwise (an accounting fiction, the work runs on the CPU)."""
    if backend.on_gpu():
        from .fleet import real_devices

        return {"num_gpus": min(1.0, real_devices() / max(1, int(actors))), "num_cpus": 0}
    return {"num_gpus": 1, "num_cpus": 0}


def values(ds) -> np.ndarray:
    """Run the dataset; its ``value`` column in image order (float32)."""
    quiet()
    ids, vals = [], []
    for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
        ids.append(np.asarray(batch["id"]))
        vals.append(np.asarray(batch["value"], dtype=np.float32))
    if not ids:
        return np.zeros(0, dtype=np.float32)
    ids, vals = np.concatenate(ids), np.concatenate(vals)
    return vals[np.argsort(ids, kind="stable")]


def expected(seed: int, n: int) -> np.ndarray:
    """What a correct run of :func:`images` (seed, n) through the stages gives, on the host."""
    images = crop(raw(seed, np.arange(int(n))))
    return kernels.blur_numpy(images).mean(axis=(1, 2), dtype=np.float32)
