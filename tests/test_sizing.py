"""course.sizing: the capstone's numbers come from the labs' result files when they are there,
are measured when they are not, and every number says where it came from."""

from __future__ import annotations

from course import results, sizing

FULL = {
    "00_measure": {"kernel_images_per_s": {"1": 900.0, "16": 9000.0, "64": 20000.0, "256": 30000.0}},
    "01_actor_scaling": {"call_overhead_s": 0.0012},
    "02_restart_recovery": {"restart_p50_s": 1.4},
    "03_quotas": {"tenant_share": {"a": 0.5, "b": 0.25, "c": 0.25}},
    "04_data_affinity": {"link_bytes_per_s": 2.5e9},
}


def test_numbers_come_from_the_result_files_and_say_so(tmp_path):
    for lab, numbers in FULL.items():
        results.save(lab, numbers, tmp_path)
    m, notes = sizing.machine(4, tmp_path)
    assert m["kernel_images_per_s"] == FULL["00_measure"]["kernel_images_per_s"]
    assert (m["call_overhead_s"], m["restart_s"], m["quota_share"], m["link_bytes_per_s"]) == (0.0012, 1.4, 0.5, 2.5e9)
    assert m["gpus_per_node"] == 4 and m["cpu_images_per_s"] > 0
    text = "\n".join(notes)
    for where in ("lab 00", "lab 01", "lab 02, p50", "lab 03", "lab 04", "measured now: pipeline.preprocess",
                  "an assumption, not measured"):
        assert where in text, text
    assert len(notes) == len(m)


def test_a_sweep_without_large_batches_is_measured_again():
    assert sizing.kernel_rates(quick_images=256).keys() == {str(n) for n in sizing.SIZES}
