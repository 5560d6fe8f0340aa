"""Grading slots: cores split without overlap, one holder per slot, a dead holder's slot free
again, and side-by-side grading refused without the sandbox."""

from __future__ import annotations

import os
from types import SimpleNamespace
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.grader.engine import cohort, slots
from autograder.grader.isolation import processes
from autograder.grader.errors import SetupError
from notebooks import make_course, only_extended, released, sandboxed, solution, submit


@pytest.mark.parametrize("cores, n, want", [
    ([0, 1], 2, [(0,), (1,)]),
    ([3, 0, 2, 1], 2, [(0, 1), (2, 3)]),
    ([0, 1, 2, 3, 4], 2, [(0, 1, 2), (3, 4)]),
    ([0, 1], 1, [(0, 1)]),
    ([0, 1], 3, [(0,), (1,), (0,)]),  # more slots than cores: shared, which calibrate shows
])
def test_cores_are_split_into_contiguous_sets(cores, n, want):
    assert slots.split(cores, n) == want


def test_each_slot_has_one_holder_and_a_dead_holders_slot_is_free(tmp_path):
    first = slots.claim(2, tmp_path)
    second = slots.claim(2, tmp_path)
    assert {first.index, second.index} == {0, 1}
    if len(os.sched_getaffinity(0)) >= 2:
        assert not set(first.cores) & set(second.cores)
    with pytest.raises(RuntimeError, match="all 2 grading slots"):
        slots.claim(2, tmp_path)
    first.release()
    again = slots.claim(2, tmp_path)
    assert again.index == first.index
    again.release()
    second.release()
    # a holder killed while holding: the kernel drops its lock
    code = (f"import sys, time; sys.path.insert(0, {str(os.getcwd())!r})\n"
            f"from autograder.grader.engine import slots\nfrom pathlib import Path\n"
            f"s = slots.claim(1, Path({str(tmp_path)!r}))\nprint(s.index, flush=True)\ntime.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "0"
    with pytest.raises(RuntimeError):
        slots.claim(1, tmp_path)
    holder.kill()
    holder.wait()
    slots.claim(1, tmp_path).release()


def test_the_next_holder_ends_what_the_last_grading_left(tmp_path):
    """A grading's group recorded in the slot is swept by whoever holds the slot next."""
    from autograder.grader.isolation import cgroup

    group = cgroup.create(memory_bytes=None, processes=64, name="autograder-test-slot")
    if group is None:
        pytest.skip("no control group can be made here")
    slot = slots.claim(1, tmp_path)
    slot.hold(group.folders)
    left = subprocess.Popen(["sleep", "300"], stdout=subprocess.DEVNULL)
    for procs in group.procs:
        with open(procs, "w") as f:
            f.write(str(left.pid))
    slot.release()
    nxt = slots.claim(1, tmp_path)
    assert nxt.sweep() >= 1
    deadline = time.monotonic() + 5
    while left.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left.poll() is not None, "the leftover process still runs"
    assert not any(f.exists() for f in group.folders)
    nxt.release()


def test_a_stopped_run_ends_what_its_gradings_left_in_slots_no_one_holds(tmp_path):
    """``grade --workers`` stopped: its Ray workers die and free their slots' locks, and the run
    sweeps those slots at once (not when a later run claims them); a slot another run still
    holds is left alone."""
    from autograder.grader.isolation import cgroup

    group = cgroup.create(memory_bytes=None, processes=64, name="autograder-test-stopped")
    if group is None:
        pytest.skip("no control group can be made here")
    dead, alive = slots.claim(2, tmp_path), slots.claim(2, tmp_path)
    dead.hold(group.folders)
    left = subprocess.Popen(["sleep", "300"], stdout=subprocess.DEVNULL)
    for procs in group.procs:
        with open(procs, "w") as f:
            f.write(str(left.pid))
    dead.release()  # its holder died
    began = time.monotonic()
    assert slots.sweep_unheld(tmp_path, wait_s=0.5) >= 1
    assert left.wait(timeout=5) is not None and not any(f.exists() for f in group.folders)
    assert time.monotonic() - began < 5  # waited its 0.5 s for the held slot, no longer
    alive.release()


GRADING_KILLED_HALF_WAY = """
import os, subprocess, sys
from autograder.grader.isolation import cgroup
sys.stdin.readline()  # moved into the slot's group by now
group = cgroup.create(memory_bytes=None, processes=64, name="autograder-test-sandbox", pausable=True)
left = subprocess.Popen(["sleep", "300"], stdout=subprocess.DEVNULL)
for procs in group.learner_procs:
    with open(procs, "w") as f:
        f.write(str(left.pid))
print(left.pid, *group.every_folder, flush=True)
os._exit(0)  # killed: its group never closed
"""


def test_the_next_holder_ends_a_pausing_gradings_learner_side_groups_too(tmp_path):
    """A grading killed with its learner side's freezer and cpu groups made (labs that pause):
    they were made inside the slot's own, so the slot's next holder ends and removes them too."""
    from autograder.grader.isolation import cgroup

    group = cgroup.create(memory_bytes=None, processes=256, name="autograder-test-slot", pausable=True)
    if group is None or not group.sides:
        pytest.skip("no control group with a learner side can be made here")
    slot = slots.claim(1, tmp_path)
    grading = subprocess.Popen([sys.executable, "-c", GRADING_KILLED_HALF_WAY], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    slot.hold(group.enter(grading.pid))
    out, _ = grading.communicate("go\n", timeout=60)
    pid, *left = out.split()
    sides = [p for p in left if "/freezer/" in p or "/cpu/" in p or p.endswith("/learner")]
    assert sides and all(os.path.isdir(p) for p in left), out
    slot.release()
    nxt = slots.claim(1, tmp_path)
    assert nxt.sweep() >= 1
    nxt.release()
    assert not [p for p in [*left, *map(str, group.every_folder)] if os.path.exists(p)]
    assert processes._zombie(int(pid)), "the grading's leftover process still runs"  # gone or a zombie


def test_side_by_side_grading_needs_the_sandbox(tmp_path):
    course = make_course(tmp_path / "course", ["00_measure"])
    submit(course, "bob", "00_measure", released("00_measure"))
    with pytest.raises(SetupError, match="sandboxes only"):
        cohort.run(course, sandboxed=False, workers=2)


def test_workers_and_ray_are_one_or_the_other(capsys):
    from autograder import cli

    with pytest.raises(SystemExit):
        cli.main(["grade", ".", "--workers", "2", "--ray", "auto"])
    assert "not allowed with" in capsys.readouterr().err


def test_grade_refuses_a_concurrency_calibrate_found_unfair(tmp_path, monkeypatch):
    """A tier that separated one at a time but not N at a time refuses --workers N for its lab;
    one that never separated is said, not refused; a tier never measured at N refuses too, unless
    --uncalibrated; a lab with no timed tier needs no calibration."""
    from functools import partial

    from autograder.grader.engine import fair_timing

    fair_timing = SimpleNamespace(record=fair_timing.record, allowed=partial(fair_timing.allowed, cores=4))
    record = tmp_path / "calibration.json"
    ok, why = fair_timing.allowed(2, {"01_actor_scaling"}, record)
    assert not ok and "has not measured 01_actor_scaling/driver, 01_actor_scaling/worker" in why
    assert "calibrate 01_actor_scaling --workers 2" in why and "--uncalibrated" in why
    ok, why = fair_timing.allowed(2, {"01_actor_scaling"}, record, uncalibrated=True)
    assert ok and why.startswith("warning:") and "not known on this machine" in why
    assert fair_timing.allowed(2, {"02_restart_recovery", "not-a-lab"}, record) == (
        True, "no lab graded here has a timed tier: 2 gradings side by side need no calibration")
    fair_timing.record(1, {"01_actor_scaling/worker": True, "05_capstone/pipeline-throughput": False}, record)
    fair_timing.record(2, {"01_actor_scaling/worker": False, "05_capstone/pipeline-throughput": False}, record)
    ok, why = fair_timing.allowed(2, {"01_actor_scaling"}, record, uncalibrated=True)
    assert not ok and "01_actor_scaling/worker" in why and "not separate" in why
    ok, why = fair_timing.allowed(2, {"05_capstone"}, record)
    assert ok and "not separating one at a time either: 05_capstone/pipeline-throughput" in why
    fair_timing.record(2, {"01_actor_scaling/worker": True}, record)  # measured again: replaced
    ok, why = fair_timing.allowed(2, {"01_actor_scaling"}, record)
    assert not ok and "has not measured 01_actor_scaling/driver" in why  # one of its two tiers still unmeasured
    fair_timing.record(2, {"01_actor_scaling/driver": True}, record)
    ok, why = fair_timing.allowed(2, {"01_actor_scaling"}, record)
    assert ok and "every tier separates" in why
    assert not fair_timing.allowed(4, {"01_actor_scaling"}, record, cores=8)[0]  # measured at 2, not at 4


def test_a_lab_needing_more_cores_than_a_slot_takes_several_and_grades_fewer_at_a_time(tmp_path):
    """Lab 01's throughput-model checks have no reference beside them, so its grades need 2 cores
    (``min_slot_cores``): with --workers 2 on 2 cores one grading of it takes both slots, and is
    read as graded one at a time (no calibration at 2 needed for it), while lab 00 beside it
    grades 2 at a time and needs its own; on 4 cores it takes one slot; a lab no set of slots can
    give its cores is refused, even --uncalibrated."""
    from autograder.grader.engine import fair_timing

    record = tmp_path / "calibration.json"
    assert fair_timing.widths(2, {"01_actor_scaling", "00_measure", "not-a-lab"}, cores=2) == {
        "00_measure": 1, "01_actor_scaling": 2}
    assert fair_timing.widths(2, {"01_actor_scaling"}, cores=4) == {"01_actor_scaling": 1}
    assert fair_timing.widths(4, {"01_actor_scaling"}, cores=4) == {"01_actor_scaling": 2}
    assert fair_timing.widths(3, {"01_actor_scaling"}, cores=5) == {"01_actor_scaling": 2}  # sets of 2, 2, 1 cores
    ok, why = fair_timing.allowed(2, {"01_actor_scaling"}, record, cores=2)
    assert ok and why == "01_actor_scaling needs 2 cores a grading, 2 slots here: 1 at a time"
    ok, why = fair_timing.allowed(2, {"01_actor_scaling", "00_measure"}, record, cores=2)
    assert not ok and "calibrate 00_measure --workers 2" in why and "calibrate 01_actor_scaling" not in why
    fair_timing.record(2, dict.fromkeys(fair_timing.wanted({"00_measure"}), True), record)
    ok, why = fair_timing.allowed(2, {"01_actor_scaling", "00_measure"}, record, cores=2)
    assert ok and "01_actor_scaling needs 2 cores" in why and "every tier separates" in why
    ok, why = fair_timing.allowed(4, {"01_actor_scaling"}, record, cores=4)  # 2 slots each: 2 at a time
    assert not ok and "calibrate 01_actor_scaling --workers 2" in why
    for workers, cores in ((2, 1), (3, 2)):  # one core in all; more slots than cores, which cannot add up
        ok, why = fair_timing.allowed(workers, {"01_actor_scaling"}, record, cores=cores, uncalibrated=True)
        assert not ok and f"01_actor_scaling needs 2 cores a grading, and {workers} slots on {cores} cores" in why


def test_on_a_cluster_a_lab_asks_for_the_slots_its_smallest_node_needs_and_no_node_may_starve_it():
    """``grade --ray``: a grading asking Ray for W slots may start on any node with W free, so W is
    the largest any node needs, and a node whose slots cannot give the cores at all refuses the
    course (a grading would start there on too few)."""
    from autograder.grader.engine import fair_timing, pool

    lab = {"01_actor_scaling"}
    assert fair_timing.widths_on([(1, 2), (1, 2)], lab | {"00_measure"}) == {"00_measure": 1, "01_actor_scaling": 1}
    assert fair_timing.widths_on([(4, 4), (2, 8)], lab) == {"01_actor_scaling": 2}  # 1-core slots on the first
    with pytest.raises(fair_timing.Unfit, match="needs 2 cores a grading, and 2 slots on 1 cores"):
        fair_timing.widths_on([(4, 8), (2, 1)], lab)  # the second would be handed a 1-slot grading of it
    with pytest.raises(SetupError, match="needs 2 cores a grading, and 1 slots on 1 cores"):
        pool.widths([(1, 1)], lab)
    assert fair_timing.widths(2, lab, cores=2) == fair_timing.widths_on([(2, 2)], lab) == {"01_actor_scaling": 2}


def test_a_wide_grading_claims_that_many_slots_and_their_cores_together(tmp_path):
    """What a grading of such a lab holds in its slot: two slots' locks, cores and sweep records."""
    wide = slots.claim(3, tmp_path, width=2)
    assert wide.index == 0 and len(wide.paths) == 2
    assert wide.cores == tuple(sorted(set(slots.split(list(os.sched_getaffinity(0)), 3)[0])
                                      | set(slots.split(list(os.sched_getaffinity(0)), 3)[1])))
    with pytest.raises(RuntimeError, match="1 of this machine's 3 grading slots are free, and this grading needs 2"):
        slots.claim(3, tmp_path, width=2)
    narrow = slots.claim(3, tmp_path)
    assert narrow.index == 2  # the one left
    wide.hold((tmp_path / "group",))
    assert all(p.read_text() == f'["{tmp_path / "group"}"]' for p in wide.paths)
    wide.release()
    again = slots.claim(3, tmp_path, width=2)
    assert again.index == 0 and again.paths == wide.paths
    again.release()
    narrow.release()


@only_extended("the slots' claim and the widths are tested above; the session notes report the real run")
@pytest.mark.slow
@pytest.mark.grading
def test_grade_workers_2_on_2_cores_grades_lab_01_across_both_slots_and_lab_00_in_one(tmp_path):
    """The real ``grade --workers 2`` of a course holding lab 00 (one slot a grading) and lab 01
    (2 cores a grading): every solution full marks, each lab 01 grading on both cores, each lab
    00 grading on one."""
    import csv
    import re

    if len(os.sched_getaffinity(0)) != 2 or not sandboxed():
        pytest.skip("needs exactly two cores and the sandbox")
    course = make_course(tmp_path / "course", ["00_measure", "01_actor_scaling"])
    for student in ("ann", "bob"):
        submit(course, student, "00_measure", solution("00_measure"))
    submit(course, "cy", "01_actor_scaling", solution("01_actor_scaling"))
    assert cohort.run(course, workers=2, uncalibrated=True) == 0  # lab 00's tiers at 2 are not measured here
    rows = {(r["student_id"], r["assignment"]): r for r in csv.DictReader((course / "grades.csv").open())}
    assert len(rows) == 3 and all(r["score"] == r["max_score"] for r in rows.values()), rows
    where = r"\[autograder \| slot\] node \S+, slot \d+, cores \((.*?)\)"
    cores = {key: re.findall(where, (course / "autograded" / key[0] / key[1] / "autograde.log").read_text())
             for key in rows}
    assert cores[("cy", "01_actor_scaling")] == ["0, 1"], cores
    assert all(c and "," not in c[-1].rstrip(",") for key, c in cores.items() if key[1] == "00_measure"), cores


def test_calibrate_workers_grades_each_solution_once_in_each_slot_and_keeps_what_it_lost(monkeypatch, capsys):
    """``calibrate --workers N``'s second half: N gradings of a lab's solution at once, each on
    its own slot's cores, their JSON reports read among whatever else they printed; what any slot
    lost is kept, and a grading that ended without a report counts as lost with why."""
    from autograder.grader.engine import fair_timing

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores")
    # a stand-in for `check --json` that loses one check named for the core it was pinned to
    probe = ("import json, os, sys\nlab = sys.argv[1]\nif lab == 'crashes': sys.exit('boom')\n"
             "core = sorted(os.sched_getaffinity(0))\nprint('(raylet) noise')\n"
             "full = lab == 'fine'\nchecks = [{'name': 'kept', 'score': 2, 'max_score': 2}, "
             "{'name': f'on-cores-{core}', 'score': 1 if full else 0, 'max_score': 1}]\n"
             "print(json.dumps({'error': '', 'score': sum(c['score'] for c in checks), 'max_score': 3, "
             "'checks': checks}, indent=2))")
    monkeypatch.setattr(fair_timing, "check_argv", lambda lab, sandboxed: [sys.executable, "-c", probe, lab])
    cores = slots.split(list(os.sched_getaffinity(0)), 2)
    lost = fair_timing.grade_solutions(["fine", "starved", "crashes"], 2, runs=2)
    assert lost["fine"] == []
    assert lost["starved"] == [f"on-cores-{list(c)}" for c in cores]  # one core each, not the same one
    assert len(lost["crashes"]) == 1 and lost["crashes"][0].startswith("not graded (code 1): boom")
    said = capsys.readouterr().out
    assert f"[slot 1, cores {cores[1]}] fine solution: 3/3 (full marks)" in said
    assert f"[slot 0, cores {cores[0]}] starved solution: 2/3, lost on-cores-{list(cores[0])}" in said


def test_grade_refuses_a_lab_whose_solution_lost_points_graded_side_by_side(tmp_path):
    """What calibrate --workers N found grading the solutions decides, lab by lab, and a lab
    measured again replaces what was kept."""
    from autograder.grader.engine import fair_timing

    record = tmp_path / "calibration.json"
    fair_timing.record(2, dict.fromkeys(fair_timing.wanted({"00_measure"}), True), record,
                       lost={"00_measure": ["sweep-tier2"], "02_restart_recovery": []})
    ok, why = fair_timing.allowed(2, {"00_measure", "02_restart_recovery"}, record, cores=4, uncalibrated=True)
    assert not ok and "solutions 2 at a time" in why and "00_measure lost sweep-tier2" in why
    assert "02_restart_recovery" not in why
    assert fair_timing.allowed(2, {"02_restart_recovery"}, record, cores=4)[0]
    assert fair_timing.allowed(3, {"00_measure"}, record, cores=6, uncalibrated=True)[0]  # lost at 2, not measured at 3
    fair_timing.record(2, {}, record, lost={"00_measure": []})  # graded again: full marks
    ok, why = fair_timing.allowed(2, {"00_measure"}, record, cores=4)
    assert ok and "every tier separates" in why


def test_sandboxed_code_cannot_widen_its_cores_beyond_its_slot(tmp_path):
    """Learner code in a slot's sandbox asks for every core of the machine: the ``cpuset`` of its
    control group refuses, so it cannot run its threads on another slot's cores."""
    from autograder.grader.isolation import cgroup, sandbox

    if sandbox.unavailable() or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs the sandbox and two cores")
    mine = tuple(sorted(os.sched_getaffinity(0)))[:1]
    group = cgroup.create(memory_bytes=None, processes=64, cpus=mine, name="autograder-test-cpuset")
    if group is None or not any((f / "cpuset.cpus").exists() for f in group.folders):
        pytest.skip("no cpuset control group can be made here")
    probe = ("import os, json\nallowed = sorted(os.sched_getaffinity(0))\n"
             "try:\n    os.sched_setaffinity(0, range(os.cpu_count()))\n    asked = 'done'\n"
             "except OSError as e:\n    asked = e.__class__.__name__\n"
             "print(json.dumps([allowed, asked, sorted(os.sched_getaffinity(0))]))")
    box = sandbox.Sandbox(readable=tuple(sandbox.python_paths()), etc=sandbox.etc_files(tmp_path / "etc"),
                          cgroup=group.procs)
    try:
        out = subprocess.run(box.argv([sys.executable, "-I", "-c", probe]), capture_output=True, text=True, timeout=60)
    finally:
        group.close()
    assert out.returncode == 0, out.stderr[-1500:]
    allowed, asked, after = __import__("json").loads(out.stdout)
    assert allowed == list(mine) and after == list(mine), (allowed, asked, after)


def test_a_calibration_copys_report_is_found_among_what_its_workers_printed():
    from autograder.grader.engine.fair_timing import _report

    out = '(MapWorker pid=7) loading\n{\n  "runs": 2,\n  "checks": [\n    {\n      "separates": true\n    }\n  ]\n}\n(raylet) done\n'
    assert _report(out) == {"runs": 2, "checks": [{"separates": True}]}
    with pytest.raises(ValueError):
        _report("(raylet) the copy died before its report\n")


@pytest.mark.grading
def test_the_outer_ray_of_grade_workers_runs_at_low_priority_and_the_driver_does_not():
    """``grade --workers N``'s own Ray is pinned to no slot: started at nice 19 (its processes and
    the workers it starts later inherit it), it runs on what the slots leave, not inside their
    timed windows; the driver is back at its own priority after (autograder/grader/engine/pool.py)."""
    import ray

    from autograder.grader.engine import pool

    if os.geteuid() != 0:
        pytest.skip("only root may lower a priority and raise it again")
    before = os.getpriority(os.PRIO_PROCESS, 0)
    pool.start(1, None)
    try:
        worker = ray.get(ray.remote(num_cpus=0)(lambda: os.getpid()).remote())  # pickled by value
        daemons = [pid for pid in processes.descendants() if b"raylet" in _command(pid) or b"gcs_server" in _command(pid)]
        assert len(daemons) >= 2 and all(_nice(pid) == pool.LOW_NICE for pid in daemons), daemons
        assert _nice(worker) == pool.LOW_NICE
        assert os.getpriority(os.PRIO_PROCESS, 0) == before
    finally:
        ray.shutdown()


def _command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return b""


def _nice(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])
