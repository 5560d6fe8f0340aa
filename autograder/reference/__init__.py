"""The instructor's reference implementations: what the grader measures learners against.

They are plain, documented, and use the same ``course`` runtime the learner has, so a
ratio of learner to reference compares approaches, not libraries. Each function or class a
lab's solution notebook defines too is the notebook's code, statement for statement
(docstrings aside): ``tests/test_reference_once.py`` holds the two identical.
"""

import functools
import time


def at_half_speed(method):
    """``method``, waiting after every call as long as the call took: half its rate. For the
    degraded copies ``python -m autograder calibrate`` measures (each lab's ``degraded()``)."""

    @functools.wraps(method)
    def slowed(*args, **kwargs):
        start = time.perf_counter()
        out = method(*args, **kwargs)
        time.sleep(time.perf_counter() - start)
        return out

    return slowed
