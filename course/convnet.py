"""The capstone's model: a small, seeded convolutional network at a real input size.

Three 3x3 convolutions (with ReLU) and two 2x2 max-pools, a global average pool and a linear
classifier (:data:`LAYERS`), on RGB ``uint8`` images of any side (224x224 in the capstone). Each
convolution is written as *im2col + one matrix multiply*: the nine shifted views of the padded
input are stacked into a ``(pixels, 9 x channels)`` matrix and multiplied by the
``(9 x channels, filters)`` weights -- so on a GPU cuBLAS does the work (CuPy's ``@``), and on a
CPU NumPy's BLAS does. The same code runs on both: the array module is the one of the batch
(:mod:`course.backend` moves it).

The weights are generated from a seed (:func:`weights`), so every process that "loads" the
model holds the same network and the grader can compute any output itself on the host
(:func:`forward` on NumPy arrays). :func:`flops` counts the multiply-adds of one image (2 FLOPs
each) from the layer shapes -- the number is computed, not quoted.

It is small on purpose: about 20 MFLOP per 224x224 image (:func:`flops`), a few milliseconds
on one CPU core, so a 2-core machine grades it in seconds. A production image model costs
hundreds of times more per image; the capstone's sizing takes the *measured* rate of this one
and says so.
"""

from __future__ import annotations

import numpy as np

from . import backend

INPUT_PX = 224       # the capstone's input side (pixels)
CLASSES = 10
# (kind, input channels, output channels, stride): conv = 3x3 convolution, padding 1, then ReLU
LAYERS = (("conv", 3, 8, 2), ("pool",), ("conv", 8, 16, 1), ("pool",), ("conv", 16, 32, 1), ("avg",),
          ("fc", 32, CLASSES))
SEED = 0


def weights(seed: int = SEED) -> list[np.ndarray]:
    """The network's parameters (float32, on the host), He-initialised from ``seed``."""
    rng = np.random.default_rng(int(seed))
    out = []
    for layer in LAYERS:
        if layer[0] == "conv":
            _, cin, cout, _ = layer
            out.append((rng.standard_normal((3, 3, cin, cout)) * np.sqrt(2 / (9 * cin))).astype(np.float32))
            out.append(np.zeros(cout, dtype=np.float32) + np.float32(0.01))
        elif layer[0] == "fc":
            _, cin, cout = layer
            out.append((rng.standard_normal((cin, cout)) / np.sqrt(cin)).astype(np.float32))
            out.append(np.zeros(cout, dtype=np.float32))
    return out


def _xp(array):
    """The array module that holds ``array`` (NumPy for a NumPy array, else the backend's)."""
    return np if isinstance(array, np.ndarray) else backend.xp()


def _conv3x3(x, w, b, stride: int):
    """3x3 convolution, padding 1, then ReLU, of a (n, h, w, c) float32 batch: im2col + matmul."""
    xp = _xp(x)
    n, h, wd, c = x.shape
    ho, wo = (h - 1) // stride + 1, (wd - 1) // stride + 1
    padded = xp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    cols = xp.stack([padded[:, dy:dy + stride * (ho - 1) + 1:stride, dx:dx + stride * (wo - 1) + 1:stride, :]
                     for dy in range(3) for dx in range(3)], axis=3)      # (n, ho, wo, 9, c)
    y = cols.reshape(n * ho * wo, 9 * c) @ w.reshape(9 * c, -1)         # the matrix multiply (BLAS / cuBLAS)
    y += b
    return xp.maximum(y, 0, out=y).reshape(n, ho, wo, -1)


def _pool2(x):
    n, h, w, c = x.shape
    return x[:, :h // 2 * 2, :w // 2 * 2].reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


def forward(images, params) -> object:
    """Logits, (n, :data:`CLASSES`) float32, of a (n, h, w, 3) uint8 batch; on the array module
    that holds ``images`` (``params`` on the same one)."""
    xp = _xp(images)
    x = images.astype(xp.float32) * xp.float32(1 / 255)
    k = 0
    for layer in LAYERS:
        if layer[0] == "conv":
            x = _conv3x3(x, params[k], params[k + 1], layer[3])
            k += 2
        elif layer[0] == "pool":
            x = _pool2(x)
        elif layer[0] == "avg":
            x = x.mean(axis=(1, 2), dtype=xp.float32)
        else:
            x = x @ params[k] + params[k + 1]
            k += 2
    return x


def flops(px: int = INPUT_PX) -> int:
    """Floating-point operations of one ``px`` x ``px`` image: 2 per multiply-add of the
    convolutions and the classifier (ReLU, pooling and bias adds are not counted)."""
    h = w = int(px)
    total = 0
    for layer in LAYERS:
        if layer[0] == "conv":
            _, cin, cout, stride = layer
            h, w = (h - 1) // stride + 1, (w - 1) // stride + 1
            total += 2 * h * w * 9 * cin * cout
        elif layer[0] == "pool":
            h, w = h // 2, w // 2
        elif layer[0] == "fc":
            total += 2 * layer[1] * layer[2]
    return total


class Network:
    """The network with its weights on the backend's device (``Network()`` is "loading" it)."""

    def __init__(self, seed: int = SEED):
        self.params = [backend.to_device(p) for p in weights(seed)]

    def __call__(self, images):
        """Logits of a (n, h, w, 3) uint8 batch (host or device); a host float32 array."""
        out = forward(backend.to_device(np.asarray(images)), self.params)
        return np.asarray(backend.to_host(out), dtype=np.float32)


def reference(images: np.ndarray, seed: int = SEED) -> np.ndarray:
    """The logits computed on the host with NumPy: what any backend's output is checked against."""
    return np.asarray(forward(np.asarray(images), weights(seed)), dtype=np.float32)
