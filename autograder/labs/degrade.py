"""Half-speed copies of reference code: what ``python -m autograder calibrate`` measures.

Each lab's ``reference.degraded()`` names its copies; a tier of that lab must pass the reference
and fail its copy (:mod:`autograder.calibrate`).
"""

from __future__ import annotations

import functools
import time


def at_half_speed(method):
    """``method``, waiting after every call as long as the call took: half its rate."""

    @functools.wraps(method)
    def slowed(*args, **kwargs):
        start = time.perf_counter()
        out = method(*args, **kwargs)
        time.sleep(time.perf_counter() - start)
        return out

    return slowed
