"""The grader's clocks, captured when the grader's process imports the kit.

Every duration a grade depends on is read from these, in the grader's own process (design
principle 2: the grader times learner code with its own clock). Learner code never runs in that
process, so nothing can patch them there; the names exist so that a check reads ``clock.perf_counter()``
rather than ``time.perf_counter()``, which a test may patch.
"""

from __future__ import annotations

import time

perf_counter = time.perf_counter
monotonic = time.monotonic
