"""Hostile lab 02 submissions (same shape as :mod:`attacks_lab00`), graded as a cohort by
``tests/test_attacks.py``. Built from the solution without demos. (Skipping or no-op'ing the
checks is the same attack in every lab behind the trust boundary; labs 00, 01 and 03 carry it.)"""

from __future__ import annotations

LAB = "02_restart_recovery"
SEED = 20251202
ALL = {"latency-sigkill", "latency-raykill", "checkpoint-resume", "checkpoint-interval",
       "chaos-complete", "chaos-exactly-once"}

ATTACKS: dict[str, dict] = {}

ATTACKS["l02-tamper-with-the-grader-actors"] = dict(
    demos=False,
    replace={"recovery_latency": '''
def recovery_latency(actor, kill):
    """Reports 1 ms, after trying to make the grader's probe agree and to stop its kill."""
    for sneak in (lambda: ray.get(actor.__ray_call__.remote(lambda self: setattr(self, "first_ping", 0.0))),
                  lambda: ray.get(actor.info.remote())):
        try:
            sneak()
        except Exception:
            pass
    faults.sigkill = faults.ray_kill = lambda *a, **k: (0, 0.0)  # the kernel's copies only
    kill()
    return 0.001
'''},
    honest=ALL - {"latency-sigkill", "latency-raykill"},
    why="recovery_latency enters the grader's probe with __ray_call__, replaces the kernel's kill "
        "functions and reports 1 ms",
)

_SHUTDOWN = "import ray\nray.shutdown()  # 'cleaning up' before the next check\n"
ATTACKS["l02-shutdown-before-every-check"] = dict(
    extended=True,  # CI: lab 00's erin-exits (tests/test_grading_lab00.py)
    demos=False,
    after={gid: [_SHUTDOWN] for gid in ("recovery_latency", "test-latency-sigkill", "test-latency-raykill",
                                         "checkpointed_accumulator", "test-checkpoint-resume",
                                         "test-checkpoint-interval", "pipeline_worker", "test-chaos-complete")},
    honest=set(ALL),
    why="not an attack: ray.shutdown() before every graded cell must cost nothing (issue 15)",
)
