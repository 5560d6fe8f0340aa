"""``python -m autograder calibrate [LAB]``: how noisy is this machine for the tiers?

Each lab's checks module may define ``calibrate()``, which measures the reference against
itself (interleaved, as grading does) and returns lines to print. A reference-vs-reference
ratio well inside the top tier means the tiers are safe on this hardware.
"""

from __future__ import annotations

import importlib

from course import backend

from .checks import for_lab, module_for
from .selfcheck import labs


def run(lab: str | None = None) -> int:
    """Print each lab's calibration; exit code 0."""
    print(f"hardware: {backend.facts()} ({backend.fingerprint()})")
    for name in [lab] if lab else labs():
        for_lab(name)
        module = importlib.import_module(module_for(name))
        if hasattr(module, "calibrate"):
            for line in module.calibrate():
                print(f"{name}: {line}")
    return 0
