"""05_capstone's kit steps (:mod:`autograder.kernel.routines`): a side's pipeline run on its own
side; Ray Data's pool actors and their tasks read from Ray's records on the reference process's
side. Imported by both; they decide nothing (the checks do)."""

from __future__ import annotations

from course import pipeline

from ...kernel.routines import _finished, step


# ---------------------------------------------------------------- kit steps

@step
def pipeline_values(build, seed: int, n: int, batch_size: int, actors: int):
    """Build a side's pipeline on ``n`` images of ``seed`` and run it; its values in image order."""
    from course import fleet

    fleet.start()
    return pipeline.values(build(int(seed), int(n), int(batch_size), int(actors)))


@step
def map_workers(driver_pid: int) -> list[str]:
    """Reference process: the ids of Ray Data's pool actors (``MapWorker(...)``) of the job whose
    driver is process ``driver_pid``, from Ray's own job and actor tables."""
    from ray._private import state

    jobs = {j["JobID"] for j in state.jobs() if j.get("DriverPid") == int(driver_pid)}
    return sorted(aid for aid, a in (state.actors() or {}).items()
                  if a.get("JobID") in jobs and str(a.get("ActorClassName", "")).startswith("MapWorker("))


@step
def pool_batches(actor_ids: list, wait_s: float = 5.0) -> int:
    """Reference process: how many ``MapWorker(...).submit`` tasks (Ray Data handing a pool
    actor a bundle of blocks) Ray's task records show finished *in* these actors' processes.
    Workers report task events about once a second; this waits up to ``wait_s`` for one."""
    import time

    from ray._private import state

    from course import cluster

    wanted = {bytes.fromhex(str(a)): cluster.gcs_actor(str(a)).get("Pid") for a in actor_ids}
    deadline = time.monotonic() + float(wait_s)
    while True:
        done = set()
        for ev in state.state._get_all_task_events():
            info, up = ev.task_info, ev.state_updates
            if (info.actor_id in wanted and info.name.startswith("MapWorker(") and info.name.endswith(".submit")
                    and up.worker_pid == wanted[info.actor_id] and _finished(up)):
                done.add(ev.task_id)
        if done or not wanted or time.monotonic() > deadline:
            return len(done)
        time.sleep(0.5)
