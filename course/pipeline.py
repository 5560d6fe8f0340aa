"""The capstone's offline batch-inference pipeline, in pieces a Ray Data job is built from.

Ray's docs recommend Ray Data for offline batch inference (docs.ray.io, "End-to-end: Offline
Batch Inference"): a dataset streams through CPU preprocessing (``map_batches`` with a function:
stateless Ray tasks) into a pool of model replicas on GPUs (``map_batches`` with a callable
class and ``compute=ray.data.ActorPoolStrategy``: stateful actors, each constructed once; the
``ray.data.Dataset.map_batches`` reference, "Stateful Transforms"). The pieces here are the course's, so every lab's
numbers compare:

* :func:`images` -- a dataset of ``n`` generated images stored as **JPEG bytes** of
  :data:`SOURCE_PX` x :data:`SOURCE_PX` pixels (no download): image ``i`` of seed ``s`` is the
  same wherever and however it is generated, so the grader knows every result. The pictures
  are smooth random colour fields with a little noise, encoded by Pillow at quality
  :data:`JPEG_QUALITY` (:func:`encode`); their byte sizes are measured, not assumed
  (:func:`jpeg_bytes`).
* :func:`preprocess` -- the CPU stage: decode each JPEG and resize it to the model's input,
  :data:`course.convnet.INPUT_PX` square, RGB (Pillow, bilinear).
* :class:`Model` -- the GPU stage: the course's convolutional network
  (:class:`course.convnet.Network`, CuPy on a GPU, NumPy on a CPU). Constructing it puts the
  weights (generated from a seed, 24 KB) on the device, and sleeps :data:`LOAD_S`: a stand-in,
  labelled as one, for reading a production model's weights file, which is why a replica
  lives in an actor.
* :func:`values` -- what a run produced (logits), in image order; :func:`expected` -- the same
  computed on the host from the seed alone (what the grader compares with).
"""

from __future__ import annotations

import io
import logging
import time

import numpy as np

from . import backend, convnet

SOURCE_PX = 256      # side of the stored JPEGs (pixels); the CPU stage resizes to convnet.INPUT_PX
JPEG_QUALITY = 90    # Pillow's JPEG quality setting for the generated images
DEFAULT_IMAGES = 256
LOAD_S = 0.5         # a sleep standing in for reading a production model's weights, once per replica


def quiet() -> None:
    """Ray Data without progress bars or per-run log lines (a graded cell must not write to stderr)."""
    import ray.data

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    ctx.verbose_stats_logs = False
    for name in ("ray.data", "ray.data._internal.execution.streaming_executor"):
        logging.getLogger(name).setLevel(logging.ERROR)


def picture(seed: int, i: int, px: int = SOURCE_PX) -> np.ndarray:
    """Image ``i`` of ``seed``: a (px, px, 3) uint8 smooth random colour field plus mild noise."""
    from PIL import Image

    rng = np.random.default_rng([int(seed), int(i)])
    coarse = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
    smooth = np.asarray(Image.fromarray(coarse).resize((int(px), int(px)), Image.BILINEAR), dtype=np.int16)
    noise = rng.integers(-12, 13, (int(px), int(px), 1), dtype=np.int16)
    return np.clip(smooth + noise, 0, 255).astype(np.uint8)


def encode(image: np.ndarray) -> bytes:
    """JPEG bytes of a (h, w, 3) uint8 image (Pillow, quality :data:`JPEG_QUALITY`)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=JPEG_QUALITY)
    return buf.getvalue()


def jpegs(seed: int, ids, px: int = SOURCE_PX) -> np.ndarray:
    """JPEG bytes of images ``ids`` of ``seed`` (an object array of ``bytes``)."""
    ids = np.asarray(ids, dtype=np.int64)
    out = np.empty(len(ids), dtype=object)
    for k, i in enumerate(ids):
        out[k] = encode(picture(seed, int(i), px))
    return out


def jpeg_bytes(px: int, count: int = 8, seed: int = 0) -> float:
    """Mean size in bytes of a generated ``px`` x ``px`` JPEG (measured on ``count`` images)."""
    return float(np.mean([len(b) for b in jpegs(seed, np.arange(count), px)]))


def _generate(batch: dict, seed: int, px: int) -> dict:
    ids = np.asarray(batch["id"], dtype=np.int64)
    return {"id": ids, "jpeg": jpegs(seed, ids, px)}


def images(seed: int, n: int = DEFAULT_IMAGES, *, blocks: int = 8, px: int = SOURCE_PX):
    """A Ray Data dataset of ``n`` generated JPEGs (columns ``id``, ``jpeg``), in ``blocks`` blocks."""
    import ray.data

    quiet()
    return ray.data.range(int(n), override_num_blocks=int(blocks)).map_batches(
        _generate, fn_kwargs={"seed": int(seed), "px": int(px)}, batch_size=None)


def decode(data: bytes, px: int = convnet.INPUT_PX) -> np.ndarray:
    """One JPEG decoded and resized to ``px`` x ``px`` RGB: a (px, px, 3) uint8 array."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB").resize((int(px), int(px)), Image.BILINEAR), dtype=np.uint8)


def decode_all(jpeg, px: int = convnet.INPUT_PX) -> np.ndarray:
    """A batch of JPEGs decoded and resized: (n, px, px, 3) uint8."""
    jpeg = list(jpeg)
    out = np.empty((len(jpeg), int(px), int(px), 3), dtype=np.uint8)
    for k, data in enumerate(jpeg):
        out[k] = decode(bytes(data), px)
    return out


def preprocess(batch: dict) -> dict:
    """The CPU stage: decode each JPEG and resize it to the model's input (keeps ``id``)."""
    return {"id": batch["id"], "image": decode_all(batch["jpeg"])}


class Model:
    """One model replica: constructing it puts the network's weights on the device and sleeps
    :data:`LOAD_S` (a stand-in for reading a real model's weights); each call runs the network
    on a batch of preprocessed images and returns its logits."""

    def __init__(self):
        time.sleep(LOAD_S)
        self.network = convnet.Network()

    def __call__(self, batch: dict) -> dict:
        return {"id": batch["id"], "value": self.network(np.asarray(batch["image"]))}


def actor_options(actors: int) -> dict:
    """Resources for one replica in a pool of ``actors``: a share of the real GPUs with CuPy;
    one *logical* GPU and no CPU otherwise (an accounting fiction, the work runs on the CPU)."""
    if backend.on_gpu():
        from .fleet import real_devices

        return {"num_gpus": min(1.0, real_devices() / max(1, int(actors))), "num_cpus": 0}
    return {"num_gpus": 1, "num_cpus": 0}


def gpus_used(actors: int) -> int:
    """Physical GPUs a pool of ``actors`` replicas holds with :func:`actor_options`: each replica
    holds at most one, so ``min(GPUs, actors)`` (2 of 8 GPUs for 2 replicas); 0 without a GPU."""
    if not backend.on_gpu():
        return 0
    from .fleet import real_devices

    return min(int(real_devices()), max(1, int(actors)))


def values(ds) -> np.ndarray:
    """Run the dataset; its ``value`` column (logits, one row per image) in image order (float32)."""
    quiet()
    ids, vals = [], []
    for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
        ids.append(np.asarray(batch["id"]))
        vals.append(np.asarray(batch["value"], dtype=np.float32).reshape(len(batch["id"]), -1))
    if not ids:
        return np.zeros((0, convnet.CLASSES), dtype=np.float32)
    ids, vals = np.concatenate(ids), np.concatenate(vals)
    return vals[np.argsort(ids, kind="stable")]


def expected(seed: int, n: int, ids=None) -> np.ndarray:
    """What a correct run of :func:`images` (seed, n) through the stages gives, on the host
    (the rows ``ids`` only, when given)."""
    ids = np.arange(int(n)) if ids is None else np.asarray(ids, dtype=np.int64)
    return convnet.reference(decode_all(jpegs(seed, ids)))
