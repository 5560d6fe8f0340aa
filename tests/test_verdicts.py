"""course.verdicts: each claim's rule applied to the learner's numbers (no Ray, no kernel)."""

from __future__ import annotations

import pytest

from course import results, verdicts

FULL = {
    "00_measure": {"backend": "numpy", "fingerprint": "numpy-cpu-2c-abcdef", "image_px": 64,
                   "kernel_images_per_s": {"1": 900.0, "16": 6000.0, "256": 7000.0}},
    "01_actor_scaling": {"call_p50_s": 0.0008, "call_p99_s": 0.003, "call_overhead_s": 0.0011,
                         "fleet_size": 8, "short_kernel_s": 0.002, "long_kernel_s": 0.05,
                         "efficiency_short": 0.2, "efficiency_long": 0.9, "knee_actors": 2, "knee_actors_long": None},
    "02_restart_recovery": {"restart_p50_s": 1.4, "restart_p95_s": 2.1, "cold_start_s": 2.5,
                            "lineage_rebuilt": ["task output"], "lineage_lost": ["owner on lost node", "actor call output"],
                            "at_most_once_lost": 2, "at_least_once_duplicates": 2,
                            "exactly_once_duplicates": 0, "exactly_once_missing": 0},
    "03_quotas": {"quota_throughput_ratio": 0.98, "quota_throughput_ratio_groups": 0.9,
                  "quotas": {"a": 8, "b": 4, "c": 4}, "quota_peaks": {"a": 8, "b": 4, "c": 4},
                  "tenant_share": {"a": 0.5, "b": 0.25, "c": 0.25},
                  "idle_fraction_fixed": 0.20, "idle_fraction_cohort": 0.04, "idle_fraction_shared": 0.03,
                  "wait_s": {"fixed quotas": {"a": 0.40, "b": 0.27, "c": 0.14},
                             "shared pool": {"a": 0.14, "b": 0.28, "c": 0.16},
                             "cohort (yours)": {"a": 0.19, "b": 0.20, "c": 0.16}}},
    "04_data_affinity": {"nodes": 4, "input_bytes": 48 * 2**20, "locality_fraction": 1.0,
                         "locality_fraction_naive": 0.25, "locality_fraction_tasks": 0.9,
                         "cross_node_bytes_naive": 36 * 2**20, "cross_node_bytes_aware": 0,
                         "cross_node_bytes_tasks": 4 * 2**20},
}


def with_(lab, **changes):
    """FULL with some of ``lab``'s numbers changed."""
    return {**FULL, lab: {**FULL[lab], **changes}}


def test_every_claim_has_a_rule_a_lab_and_a_docstring():
    assert list(verdicts.RULES) == list(verdicts.CLAIMS) == [f"C{i}" for i in range(1, 9)]
    assert set(verdicts.LAB_OF) == set(verdicts.CLAIMS)
    for claim, rule in verdicts.RULES.items():
        assert rule.__doc__ and claim in rule.__doc__


@pytest.mark.parametrize("numbers", [{}, None, {lab: {} for lab in results.SCHEMA},
                                     {"01_actor_scaling": {"call_p99_s": "fast"}, "02_restart_recovery": []}])
def test_nothing_measured_never_raises_and_names_the_lab(numbers):
    rows = verdicts.table(numbers)
    assert [r.claim for r in rows] == list(verdicts.CLAIMS)
    for r in rows:
        assert "not measured yet" in r.yours and "run lab" in r.yours, r
        assert r.docs and r.source and r.text == verdicts.CLAIMS[r.claim]
    assert "run lab 01" in rows[0].yours and "run lab 02" in rows[2].yours and "run lab 04" in rows[5].yours


def test_c3_follows_the_measured_p50():
    fast = verdicts.c3(with_("02_restart_recovery", restart_p50_s=0.03))
    slow = verdicts.c3(with_("02_restart_recovery", restart_p50_s=1.4))
    assert fast.verdict.startswith("Ray half: consistent")
    assert slow.verdict.startswith("Ray half: not reproduced — p50 = 47× the claim")
    assert "30 ms" in fast.yours and "1.40 s" in slow.yours
    edge = verdicts.c3(with_("02_restart_recovery", restart_p50_s=0.061))
    assert "not reproduced" in edge.verdict  # the rule: within 2× of 30 ms, i.e. ≤ 60 ms


def test_c3_kubernetes_half_is_reframed_not_refuted():
    """No documented number contradicts "~200 ms": the pages show another mechanism (issue 44)."""
    for numbers in (FULL, {}):
        r = verdicts.c3(numbers)
        assert "Kubernetes half: documented — reframed" in r.verdict, r.verdict
        assert "refuted" not in r.verdict, r.verdict
        assert "restart in place" in r.verdict and "p99 ≤ 5 s" in r.verdict
    r = verdicts.c3(FULL)
    assert "KubeRay deletes and recreates a Ray pod whose restartPolicy is Never" in r.docs
    assert "Ready=Unknown" in r.docs and "out-of-service" in r.docs
    assert "`slos/slos.md`" in r.source and "shouldDeletePod" in r.source


def test_two_result_files_give_two_verdicts(tmp_path):
    """The issue's acceptance test: the same code, two learners' files, different verdicts."""
    a, b = tmp_path / "a", tmp_path / "b"
    results.save("02_restart_recovery", {"restart_p50_s": 0.03, "restart_p95_s": 0.05}, a)
    results.save("02_restart_recovery", {"restart_p50_s": 1.4, "restart_p95_s": 2.0}, b)
    ra, rb = (verdicts.for_lab("02_restart_recovery", results.load_all(f)) for f in (a, b))
    assert [r.claim for r in ra] == ["C3", "C4"]
    assert ra[0].verdict != rb[0].verdict
    assert "consistent" in ra[0].verdict and "not reproduced" in rb[0].verdict


def test_kubernetes_halves_are_documented_not_measured():
    for r in verdicts.table(FULL):
        if r.claim in ("C1", "C2", "C3", "C5"):
            assert "Kubernetes half: documented" in r.verdict, r
            assert "kubernetes.io" in r.source or "sig-scalability" in r.source, r


def test_c1_follows_the_efficiency_and_extrapolates_from_the_overhead():
    low = verdicts.c1(FULL)
    assert "not reproduced — efficiency 0.20 with 2 ms kernels on 8 emulated GPUs" in low.verdict
    assert "500 × 1.1 ms = 0.55 s per call (extrapolated)" in low.verdict
    high = verdicts.c1(with_("01_actor_scaling", efficiency_short=0.85))
    assert "Ray half: consistent here" in high.verdict and "500 GPUs untested" in high.verdict


def test_c2_is_not_testable_on_one_machine_and_says_what_was_measured():
    fast = verdicts.c2(FULL)
    assert fast.verdict.startswith("Ray half: not testable here — the claim is about clusters beyond ~200 nodes")
    assert "3 ms, under the claimed 20 ms" in fast.verdict and "consistent" not in fast.verdict
    slow = verdicts.c2(with_("01_actor_scaling", call_p99_s=0.05))
    assert "50 ms, 2.5× the claimed 20 ms" in slow.verdict and "not testable here" in slow.verdict


def test_c4_reframes_when_lineage_rebuilds_task_outputs_only():
    r = verdicts.c4(FULL)
    assert r.verdict.startswith("reframed") and "exactly once" in r.verdict
    assert "naive retries applied 2 effects twice" in r.yours
    broken = verdicts.c4(with_("02_restart_recovery", exactly_once_duplicates=3))
    assert "not yet exactly once" in broken.verdict
    nothing_lost = verdicts.c4(with_("02_restart_recovery", lineage_lost=[],
                                     lineage_rebuilt=["task output", "actor call output"]))
    assert nothing_lost.verdict.startswith("not reproduced")


def test_c5_names_what_it_measures_and_follows_the_idle_gpu_time():
    """Issue 52: the saturated run measures scheduling overhead at balanced saturation; what fixed
    quotas cost is GPU-time left idle while work waited under bursty demand."""
    r = verdicts.c5(FULL)
    assert r.verdict.startswith("Ray half: reframed — fixed quotas cost 20 % of the pool as GPUs idle while work "
                                "waited"), r.verdict
    assert "borrowing recovered 80 % of that idle time" in r.verdict
    assert "scheduling overhead at balanced saturation +2 %" in r.yours
    assert "fixed quotas left 20 % of the pool's GPU-time idle while work waited, borrowing in a cohort 4 %" in r.yours
    assert "no tenant over its quota" in r.verdict
    assert "not admission control" in r.docs
    assert "a placement group binds only the tasks sent into it" in r.docs  # voluntary too (issue 44)
    assert "borrowingLimit" in r.docs and "*Cluster Queue*" in r.source


@pytest.mark.parametrize("changes, starts", [
    # each branch of the rule, fed the numbers that reach it
    (dict(quota_throughput_ratio=0.85, overhead_resolution=0.2 / 4.1), "Ray half: consistent — scheduling overhead "
                                                                        "at balanced saturation +15 %"),
    (dict(quota_throughput_ratio=0.98, idle_fraction_fixed=0.20), "Ray half: reframed — fixed quotas cost 20 %"),
    (dict(quota_throughput_ratio=0.98, idle_fraction_fixed=0.37), "Ray half: not reproduced — fixed quotas left 37 %"),
    (dict(quota_throughput_ratio=0.98, idle_fraction_fixed=0.05), "Ray half: not reproduced — fixed quotas left 5 %"),
    # one wave coarser than the band: the saturated run cannot decide, the idle GPU-time does
    (dict(quota_throughput_ratio=0.85, overhead_resolution=0.2 / 1.2), "Ray half: reframed — fixed quotas cost 20 %"),
    # the uneven-demand run not done yet: only the saturated run decides
    (dict(quota_throughput_ratio=0.85, idle_fraction_fixed=None, overhead_resolution=0.2 / 1.2),
     "Ray half: overhead not resolvable in this run — one wave of kernels is 17 %"),
    (dict(quota_throughput_ratio=0.98, idle_fraction_fixed=None), "Ray half: not reproduced — scheduling overhead +2 %"),
])
def test_c5_each_branch_of_the_rule(changes, starts):
    r = verdicts.c5(with_("03_quotas", **changes))
    assert r.verdict.startswith(starts), r.verdict
    assert "Kubernetes half: documented" in r.verdict


def test_c5_plausible_numbers_here_reach_two_verdicts():
    """Principle 12. `tenancy.replay` of `tenancy.bursty()` on this shared 2-core machine
    (2026-12-07), fixed quotas then a cohort, idle fraction of the pool: on both cores
    (0.234, 0.112), (0.201, 0.058), (0.206, 0.046), (0.200, 0.049), (0.211, 0.041), (0.249, 0.037);
    pinned to one core (`taskset -c 0`, a slower learner's machine) (0.316, 0.241),
    (0.252, 0.312), (0.364, 0.177). The saturated runs' ratio was 1.00 (targets.py). Those
    measurements give different verdicts."""
    measured = [(0.234, 0.112), (0.201, 0.058), (0.206, 0.046), (0.200, 0.049), (0.211, 0.041), (0.249, 0.037),
                (0.316, 0.241), (0.252, 0.312), (0.364, 0.177)]
    seen = {verdicts.c5(with_("03_quotas", quota_throughput_ratio=1.0, idle_fraction_fixed=fixed,
                              idle_fraction_cohort=cohort)).verdict.split(" —")[0] for fixed, cohort in measured}
    assert seen == {"Ray half: reframed", "Ray half: not reproduced"}, seen


def test_c5_a_tenant_over_its_quota_is_said():
    r = verdicts.c5(with_("03_quotas", quota_peaks={"a": 9, "b": 4, "c": 4}))
    assert "a tenant went over its quota" in r.verdict


def test_c5_the_uneven_run_alone_gives_a_verdict():
    only = {"03_quotas": {"idle_fraction_fixed": 0.2, "idle_fraction_cohort": 0.2}}
    r = verdicts.c5(only)
    assert r.verdict.startswith("Ray half: reframed") and "borrowing recovered 0 %" in r.verdict


def test_c6_and_c7_follow_the_bytes_moved():
    r6, r7 = verdicts.c6(FULL), verdicts.c7(FULL)
    assert r6.verdict.startswith("refuted: Ray moved 36.0 MiB itself")
    assert "not reproduced — 75 % of the input" in r6.verdict
    assert r7.verdict.startswith("reframed")
    near = verdicts.c6(with_("04_data_affinity", cross_node_bytes_naive=16 * 2**20, cross_node_bytes_aware=2 * 2**20))
    assert "~30 % consistent here" in near.verdict
    still = with_("04_data_affinity", cross_node_bytes_naive=0)
    assert verdicts.c6(still).verdict.startswith("not refuted") and verdicts.c7(still).verdict.startswith("not observed")
    partial = {"04_data_affinity": {"cross_node_bytes_naive": 1e6, "locality_fraction_naive": 0.3}}
    assert "run lab 04's exercise 3" in verdicts.c6(partial).yours
    assert "run lab 04's exercise 2" in verdicts.c7(partial).verdict


def test_c8_uses_the_capstone_else_lab00():
    from_lab00 = verdicts.c8(FULL)
    assert "lab 00's kernel" in from_lab00.yours and "7,000 images/s at 64×64 px" in from_lab00.yours
    assert from_lab00.verdict.startswith("not testable yet — needs the capstone's end-to-end numbers (run lab 05)")
    assert "compute only, 140× the 50 images/s per GPU" in from_lab00.verdict
    slow = {**FULL, "05_capstone": {"pipeline_images_per_s": 120.0, "devices": 4}}
    r = verdicts.c8(slow)
    assert "30 per device" in r.yours and r.verdict.startswith("not reproduced (end to end): 0.60×")
    fast = verdicts.c8({**FULL, "05_capstone": {"pipeline_images_per_s": 400.0, "devices": 2}})
    assert fast.verdict.startswith("holds here (end to end): 4× the 50 images/s per GPU")
    assert verdicts.c8({"00_measure": {"best_images_per_s": 40.0}}).verdict.startswith("not testable yet")
    assert "run lab 00" in verdicts.c8({}).yours


@pytest.mark.parametrize("lab00", [{"best_images_per_s": 40.0}, {"best_images_per_s": 1e6},
                                   {"kernel_images_per_s": {"1": 10.0, "256": 9e5}}])
def test_c8_never_decides_on_lab00_alone(lab00):
    """Lab 00's kernel rate is compute only: a verdict either way needs the capstone's pipeline."""
    r = verdicts.c8({"00_measure": lab00})
    assert r.verdict.startswith("not testable yet") and "measured so far" in r.verdict
    assert "holds" not in r.verdict and "not reproduced" not in r.verdict


def test_for_lab_picks_the_lab_claims():
    assert [r.claim for r in verdicts.for_lab("01_actor_scaling", FULL)] == ["C1", "C2"]
    assert [r.claim for r in verdicts.for_lab("04_data_affinity", FULL)] == ["C6", "C7"]
    assert [r.claim for r in verdicts.for_lab("00_measure", FULL)] == ["C8"]
    assert [r.claim for r in verdicts.for_lab("05_capstone", FULL)] == ["C8"]


def test_markdown_is_one_row_per_claim_with_the_columns():
    md = verdicts.markdown(verdicts.table(FULL)).splitlines()
    assert md[0] == "| claim | your number | what the docs say | verdict | source |"
    assert len(md) == 2 + 8 and all(line.count(" | ") >= 4 for line in md[2:])
    assert "“Ray resurrects a dead actor in ~30 ms" in md[4]
