"""course.sizing: the capstone's numbers are measured (the network, decoding, JPEG sizes), come
from the labs' result files when they are there, or are stated assumptions -- and every number
says where it came from."""

from __future__ import annotations

import pytest

from course import results, sizing

FULL = {
    "01_actor_scaling": {"call_overhead_s": 0.0012},
    "02_restart_recovery": {"restart_p50_s": 1.4},
    "03_quotas": {"tenant_share": {"a": 0.5, "b": 0.25, "c": 0.25}},
    "04_data_affinity": {"link_bytes_per_s": 2.5e9},
}


def test_numbers_come_from_the_result_files_or_are_measured_or_assumed_and_say_so(tmp_path):
    for lab, numbers in FULL.items():
        results.save(lab, numbers, tmp_path)
    m, notes = sizing.machine(4, tmp_path)
    replace_s = sizing.replacement_s(**sizing.ASSUMED_REPLACEMENT)[0]  # stated inputs, counted by default
    assert (m["call_overhead_s"], m["restart_s"], m["quota_share"]) == (0.0012, 1.4 + replace_s, 0.5)
    # the link is the stated assumption; lab 04's in-machine copy is kept apart, labelled
    assert m["link_bytes_per_s"] == sizing.ASSUMED_LINK_GBIT_S * 1e9 / 8
    assert m["in_machine_copy_bytes_per_s"] == 2.5e9
    # physical GPUs, not replicas: without a GPU the CPU is the one device its rates were measured on
    assert m["gpus_per_node"] == (sizing.physical_gpus() or 1) and m["cpu_images_per_s"] > 0
    assert m["detect_s"] > 0 and replace_s > 0
    assert "real GPUs" not in "\n".join(notes) and "4 replicas" in "\n".join(notes)
    assert set(m["kernel_images_per_s"]) == {str(b) for b in sizing.batches()}
    assert 0 <= m["model_fixed_fraction"] < 1 and 0 <= m["cpu_fixed_fraction"] < 1
    text = "\n".join(notes)
    for where in ("lab 01", "lab 02, p50", "lab 03", "measured now: the network", "measured now: JPEG decode",
                  "health checks", "an assumption, not measured", "not a network",
                  "stated inputs, not measured (set them to your fleet's)", "host_to_device: (not used by plan",
                  "gpu_memory: (not used by plan"):
        assert where in text, text
    assert len(notes) == len(m) - 1  # every number but the scaling points (drawn, not a plan input)


def test_a_fit_recovers_a_line_in_pixels():
    a, b = sizing.fit([64, 128, 224], [1e-4 + 2e-8 * px ** 2 for px in (64, 128, 224)])
    assert a == pytest.approx(1e-4, rel=1e-6) and b == pytest.approx(2e-8, rel=1e-6)
    assert sizing.fixed_fraction(a, b, 224) == pytest.approx(1e-4 / (1e-4 + 2e-8 * 224 ** 2))


def test_node_detection_is_computed_from_rays_settings():
    d = sizing.node_detection()
    assert d["refused_s"] == d["threshold"] * d["period_s"]
    assert d["timed_out_s"] == d["threshold"] * (d["timeout_s"] + d["period_s"]) > d["refused_s"]


DETECT = {"refused_s": 15.0, "timed_out_s": 65.0, "period_s": 3.0, "timeout_s": 10.0, "threshold": 5}


def test_the_uptime_says_what_it_counts_and_what_it_leaves_out():
    """Issue 44: Ray's health check probes the raylet, not the GPU; the GPU-failure case and a
    replacement's start-up are stated inputs, never silently counted as zero."""
    cost, notes = sizing.failure_cost(DETECT, 1.4, "lab 02, p50")
    assert cost == {"detect_s": 65.0, "restart_s": 1.4}
    assert "the case counted: a lost node" in notes[0]
    assert "Not counted: a GPU that fails while its raylet lives" in notes[0] and "gpu_failure_detect_s" in notes[0]
    assert "not counted: scheduling, image pull, a new node" in notes[1]
    gpu, notes = sizing.failure_cost(DETECT, 1.4, "lab 02, p50", gpu_failure_detect_s=120, replace_s=600)
    assert gpu == {"detect_s": 120.0, "restart_s": 601.4}
    assert notes[0].startswith("a stated input, not measured: the GPU-failure case")
    assert "a stated input: a replacement's scheduling, image pull and node start" in notes[1]


def test_a_replacement_is_a_sum_of_stated_inputs_never_a_fact():
    seconds, note = sizing.replacement_s(node_provision_s=90, gpu_ready_s=30, image_gb=8, pull_gbit_s=2)
    assert seconds == 90 + 30 + 8 * 8 / 2
    assert note.startswith("stated inputs, not measured (set them to your fleet's)") and "32 s" in note
    cost, notes = sizing.failure_cost(DETECT, 1.4, "lab 02, p50", replace_s=seconds, replace_why=note)
    assert cost["restart_s"] == 1.4 + seconds and notes[1].endswith(note)
    assert set(sizing.ASSUMED_REPLACEMENT) == {"node_provision_s", "gpu_ready_s", "image_gb", "pull_gbit_s"}


@pytest.mark.skipif(sizing.backend.on_gpu(), reason="the CPU path: tests/test_sizing.py's gpu tests cover a GPU")
def test_without_a_gpu_the_copy_and_gpu_memory_say_not_measured():
    for got in (sizing.host_to_device(), sizing.gpu_memory()):
        assert got == {"measured": False, "note": sizing.NOT_ON_CPU} and got["note"].startswith("not measured")
    assert sizing.physical_gpus() == 0


@pytest.mark.gpu
def test_on_a_gpu_the_copy_and_the_forward_pass_memory_are_measured():
    copy = sizing.host_to_device(batch=32, rounds=3)
    assert copy["measured"] and copy["seconds_per_image"] > 0 and copy["bytes_per_s"] > 1e8
    assert copy["bytes_per_s"] == pytest.approx(32 * 224 * 224 * 3 / (copy["seconds_per_image"] * 32))
    mem = sizing.gpu_memory(batch=32)
    # the first layer's im2col alone: 32 images x 112 x 112 pixels x 27 float32 values
    assert mem["measured"] and mem["forward_bytes"] >= 32 * 112 * 112 * 27 * 4 and mem["device_bytes"] > mem["forward_bytes"]
    assert sizing.physical_gpus() >= 1


@pytest.mark.parametrize("function", ["host_to_device", "gpu_memory", "physical_gpus"])
def test_every_cupy_name_the_sizing_gpu_path_calls_exists(monkeypatch, function):
    """Not a run (tests/test_cupy_branch.py's API check, applied to course.sizing's CuPy branch)."""
    branch = pytest.importorskip("test_cupy_branch")
    monkeypatch.setitem(branch.CUPY_BRANCH, "course.sizing", {function: False})
    branch.test_every_cupy_name_and_keyword_on_the_cupy_branch_exists("course.sizing", function)


# --- the availability (review of lab 05): MTBF / (MTBF + MTTR), never below 0 ---------------------

DOWN_S = 65.0 + 1.4 + sizing.replacement_s(**sizing.ASSUMED_REPLACEMENT)[0]  # the kit's defaults: 326.4 s


def test_availability_never_goes_negative_where_a_linear_uptime_did():
    """``1 - rate x downtime`` reached 0 at 3600 / 326.4 = 11.0 failures per GPU-hour and went
    negative past it; MTBF / (MTBF + MTTR) only falls towards 0."""
    linear = {f: 1 - f * DOWN_S / 3600 for f in (11, 12, 50)}
    assert linear[12] < 0 and linear[50] < 0
    got = [sizing.availability(f, 1, DOWN_S) for f in (0, 0.01, 0.1, 1, 10, 11, 12, 50)]
    assert got[0] == 1 and all(0 < a <= 1 for a in got) and got == sorted(got, reverse=True)
    assert sizing.availability(12, 1, DOWN_S) == pytest.approx(1 / (1 + 12 * DOWN_S / 3600))  # 0.0842
    # a lost node takes all its GPUs down: 8 GPUs a node, the same rate per GPU, 8 times the downtime
    assert sizing.availability(0.1, 8, DOWN_S) == pytest.approx(1 / (1 + 0.8 * DOWN_S / 3600))


def _plan_inputs(**change):
    m = {"base_px": 224, "kernel_images_per_s": {"32": 2000.0, "64": 2400.0}, "model_fixed_fraction": 0.1,
         "call_overhead_s": 0.001, "max_actors_per_gpu": 4, "cpu_images_per_s": 400.0, "cpu_fixed_fraction": 0.1,
         "cpus_per_node": 64, "jpeg_bytes_fixed": 500.0, "jpeg_bytes_per_pixel": 0.5, "link_bytes_per_s": 25e9 / 8,
         "gpus_per_node": 1, "gpus_per_failure": 1, "quota_share": 1.0, "detect_s": 65.0,
         "restart_s": DOWN_S - 65.0, "failures_per_gpu_hour": 0.1}
    return {**m, **change}


def test_the_plan_stays_positive_and_grows_over_the_whole_failure_sweep():
    from autograder.labs.lab05 import reference

    sweep = [0, 0.01, 0.1, 1, 10, 11, 12, 50]  # lab 05's figure, plus where the linear uptime hit 0
    gpus = [reference.plan(10_000, 224, _plan_inputs(failures_per_gpu_hour=f))["gpus"] for f in sweep]
    assert all(g > 0 for g in gpus) and gpus == sorted(gpus), gpus
    node = [reference.plan(10_000, 224, _plan_inputs(failures_per_gpu_hour=1, gpus_per_node=8, gpus_per_failure=k))
            for k in (1, 8)]
    assert node[1]["node"]["gpu"] < node[0]["node"]["gpu"]  # a lost node costs all 8 GPUs' time


def test_the_failure_case_sets_how_many_gpus_a_failure_takes_down(monkeypatch, tmp_path):
    monkeypatch.setattr(sizing, "physical_gpus", lambda: 8)
    for name, value in (("model_rates", {"8": 1.0}), ("model_scaling", {"seconds_per_image": {224: 1.0}, "fit": (0.1, 1e-5)}),
                        ("decode_scaling", {"seconds_per_image": {224: 1.0}, "fit": (0.1, 1e-5), "jpeg_bytes": {},
                                            "jpeg_fit": (500.0, 0.5)}),
                        ("call_overhead", 0.001), ("restart_time", 1.4), ("copy_rate", 1e9),
                        ("node_detection", DETECT)):
        monkeypatch.setattr(sizing, name, lambda *a, value=value, **k: value)
    monkeypatch.setattr(sizing, "host_to_device", lambda *a, **k: {"measured": False, "note": "x"})
    monkeypatch.setattr(sizing, "gpu_memory", lambda *a, **k: {"measured": False, "note": "x"})
    node, notes = sizing.machine(2, tmp_path)
    assert node["gpus_per_failure"] == 8 and "gpus_per_node x (detect_s + restart_s)" in "\n".join(notes)
    gpu, _ = sizing.machine(2, tmp_path, gpu_failure_detect_s=30)
    assert gpu["gpus_per_failure"] == 1
