"""course.verdicts: each claim's rule applied to the learner's numbers (no Ray, no kernel -- except the one
C5 test that measures this machine's per-task scheduling to feed the rule)."""

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
    "03_quotas": {"kernel_s": 0.2, "scheduling_loss": {  # lab 03's sweep on this 2-core machine, 2026-12-07
                      "0.002": {"quotas": 0.676, "none": 0.69, "spread": 0.033},
                      "0.01": {"quotas": 0.41, "none": 0.445, "spread": 0.052},
                      "0.05": {"quotas": 0.104, "none": 0.102, "spread": 0.078},
                      "0.2": {"quotas": 0.055, "none": 0.059, "spread": 0.048}},
                  "quota_throughput_ratio": 0.98, "quota_throughput_ratio_groups": 0.9,
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
    assert "not reproduced" in edge.verdict  # the rule: at most 2× the claimed 30 ms, i.e. ≤ 60 ms
    faster = verdicts.c3(with_("02_restart_recovery", restart_p50_s=0.005))
    assert "at most 2× the claimed 30 ms" in faster.verdict and "within" not in faster.verdict.split(".")[0]


def test_c3_compares_the_restart_with_the_cold_start_it_measured():
    """The claim sets Ray's restart against a pod's: the row says whether the p50 beat the floor under a
    container restart measured on the same machine (a cold process start)."""
    below = verdicts.c3(with_("02_restart_recovery", restart_p50_s=1.4, cold_start_s=2.5))
    assert "; below this machine's cold process start (2.50 s), the floor under a container restart" in below.verdict
    above = verdicts.c3(with_("02_restart_recovery", restart_p50_s=1.4, cold_start_s=1.1))
    assert "; not below this machine's cold process start (1.10 s)" in above.verdict
    assert "cold process start" not in verdicts.c3(with_("02_restart_recovery", cold_start_s=None)).verdict


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
        if r.claim in ("C2", "C3", "C5"):
            assert "Kubernetes half: documented" in r.verdict, r
        if r.claim in ("C1", "C2", "C3", "C5"):
            assert "kubernetes.io" in r.source or "sig-scalability" in r.source, r


def test_c1_kubernetes_half_has_no_documented_basis_not_a_contradiction():
    """Kubernetes' thresholds count nodes and pods, Ray's envelope nodes, actors and tasks: neither says
    anything about GPUs, so neither contradicts "~300 GPUs" -- there is simply no basis for it (issue 52)."""
    for numbers in (FULL, {}):
        r = verdicts.c1(numbers)
        assert "Kubernetes half: no documented basis" in r.verdict and "contradicted" not in r.verdict, r.verdict
    assert "`release/benchmarks/README.md`" in r.source and "*Considerations for large clusters*" in r.source


def test_the_serial_model_algebra_behind_c1s_extrapolation():
    """Efficiency of N / (t_k + N t_o) at n is (t_k + t_o) / (t_k + n t_o): 0.8 at n needs
    t_k >= (4n - 5) t_o -- about 4 n t_o -- and at the knee's kernel, n t_o, it is about 0.5."""
    t_o = 0.0011
    need = verdicts.kernel_for_efficiency(500, 0.8, t_o)
    assert need == pytest.approx(1995 * t_o)
    assert verdicts.serial_efficiency(500, need, t_o) == pytest.approx(0.8)
    assert verdicts.serial_efficiency(500, 500 * t_o, t_o) == pytest.approx(501 / 1000)
    assert verdicts.serial_efficiency(1, 0.05, t_o) == 1.0
    # the model's efficiency is its throughput ratio, as lab 01's predict_throughput gives it
    rate = lambda n, t_k: n / (t_k + n * t_o)  # noqa: E731
    assert verdicts.serial_efficiency(500, 0.05, t_o) == pytest.approx(rate(500, 0.05) / (500 * rate(1, 0.05)))


def test_c1_ray_half_is_not_testable_here_and_names_its_model():
    r = verdicts.c1(with_("01_actor_scaling", efficiency_spread=0.05))
    assert r.verdict.startswith("Ray half: not testable here — one driver and 8 sleeping actors on one machine")
    assert "consistent" not in r.verdict and "not reproduced" not in r.verdict
    assert "the 50 ms kernels scaled further than the 2 ms ones (0.90 vs 0.20, beyond the ±0.09 noise)" in r.verdict
    assert "extrapolated with your serial model N / (t_kernel + N·t_overhead)" in r.verdict
    assert "at 500 GPUs efficiency 0.09 with 50 ms kernels, 0.50 with 500 × 1.1 ms = 0.55 s kernels (its knee)" in r.verdict
    assert "0.8 needs kernels ≥ (4·500 − 5) × 1.1 ms = 2.19 s per call" in r.verdict
    assert "(noise ±0.09)" in r.yours


@pytest.mark.parametrize("changes, says", [
    ({"efficiency_short": 0.85, "efficiency_long": 0.95}, "near-linear with both kernels (≥ 0.8), this fleet below its knee"),
    ({"efficiency_spread": 0.05}, "the 50 ms kernels scaled further than the 2 ms ones"),
    ({"efficiency_short": 0.5, "efficiency_long": 0.6, "efficiency_spread": 0.1},
     "no clear difference between the kernels (0.60 vs 0.50, within the ±0.12 noise of the repeats)"),
    ({"efficiency_short": 0.5, "efficiency_long": 0.3, "efficiency_spread": 0.05},
     "the 50 ms kernels scaled less than the 2 ms ones (0.30 vs 0.50, beyond the ±0.05 noise)"),
    ({}, "0.90 vs 0.20, no spread saved to judge the difference (run section 4 again)"),
])
def test_c1_every_outcome_of_the_fleet(changes, says):
    assert says in verdicts.c1(with_("01_actor_scaling", **changes)).verdict


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
    assert "lineage rebuilt the task output only" in r.verdict
    more = verdicts.c4(with_("02_restart_recovery", lineage_rebuilt=["task output", "actor call output"],
                             lineage_lost=["owner on lost node"]))
    assert more.verdict.startswith("reframed: lineage rebuilt task output, actor call output but lost owner on lost node")
    assert "only" not in more.verdict  # issue 52: "the task output only" when it rebuilt more was false
    nothing_lost = verdicts.c4(with_("02_restart_recovery", lineage_lost=[],
                                     lineage_rebuilt=["task output", "actor call output"]))
    assert nothing_lost.verdict.startswith("not reproduced")


def test_c5_names_what_it_measures_and_reads_it_at_the_workloads_kernel():
    """Issue 52: the verdict reads per-task scheduling at the learner's kernel length; the idle GPU-time of
    the bursty plan is reported as a property of that demand pattern and decides nothing."""
    r = verdicts.c5(FULL)  # no batch saved by lab 00: the lab's own 200 ms kernel
    assert r.verdict.startswith("Ray half: not reproduced — at 200 ms kernels (your workload's), scheduling each "
                                "kernel as a Ray task left only 6 % of the pool's GPU-time unused with quotas "
                                "(6 % without; the quota's own share -0 %), under the claimed 15 %; 15 % at about "
                                "39.3 ms kernels here"), r.verdict
    assert "fixed quotas left 20 % of the pool idle under the lab's bursty demand, a property of that demand " \
           "pattern" in r.verdict and "so it does not decide" in r.verdict
    assert "borrowing recovered 80 % of that idle time" in r.verdict
    assert ("with quotas / without: 2 ms kernels 68 % / 69 %, 10 ms kernels 41 % / 44 %, 50 ms kernels 10 % / 10 %, "
            "200 ms kernels 6 % / 6 % (emulated kernels)") in r.yours
    assert "your workload's kernel: 200 ms (this lab's emulated kernel)" in r.yours
    assert "scheduling overhead at balanced saturation +2 %" in r.yours
    assert "fixed quotas left 20 % of the pool's GPU-time idle while work waited, borrowing in a cohort 4 %" in r.yours
    assert "no tenant over its quota" in r.verdict
    assert "not admission control" in r.docs and "checked when a pod is admitted" in r.docs
    assert "a placement group binds only the tasks sent into it" in r.docs  # voluntary too (issue 44)
    assert "borrowingLimit" in r.docs and "*Cluster Queue*" in r.source


def test_c5_workload_kernel_comes_from_lab00_then_the_lab():
    assert verdicts.workload_kernel_s(FULL) == (0.2, "this lab's emulated kernel")
    best = {**FULL, "00_measure": {"best_batch": 256, "best_images_per_s": 25600.0}}
    assert verdicts.workload_kernel_s(best) == (0.01, "lab 00's image kernel at your batch of 256")
    from_sweep = {**FULL, "00_measure": {"best_batch": 16, "kernel_images_per_s": {"16": 1600.0}}}
    assert verdicts.workload_kernel_s(from_sweep) == (0.01, "lab 00's image kernel at your batch of 16")
    assert verdicts.workload_kernel_s({"03_quotas": {}}) is None


def _flat(quotas, none, spread):
    return {str(k): {"quotas": quotas, "none": none, "spread": spread} for k in (0.002, 0.01, 0.05, 0.2)}


def _lab00(kernel_s):
    return {"best_batch": 100, "best_images_per_s": 100 / kernel_s}


@pytest.mark.parametrize("changes, lab00, starts", [
    # each branch of the rule, fed the numbers that reach it: the quota's own cost in the band, beyond noise
    (dict(scheduling_loss=_flat(0.30, 0.15, 0.02)), None,
     "Ray half: consistent — at 200 ms kernels (your workload's), quotas themselves cost +18 % of the pool's "
     "GPU-time, within 2× of 15 % and beyond the ±2 % noise"),
    # ... above the band
    (dict(scheduling_loss=_flat(0.60, 0.10, 0.05)), None,
     "Ray half: not reproduced — at 200 ms kernels (your workload's), quotas themselves cost +56 %, more than 2×"),
    # ... in the band but within the noise: per-task scheduling decides
    (dict(scheduling_loss=_flat(0.30, 0.15, 0.25)), None, "Ray half: reframed — at 200 ms kernels (your workload's), "
     "scheduling each kernel as a Ray task left 30 % of the pool's GPU-time unused with quotas and 15 % without"),
    # this machine's sweep, at lab 00's kernel measured here (numpy, batch 256: ~11 ms) and at the lab's 200 ms
    ({}, _lab00(0.0114), "Ray half: reframed — at 11.4 ms kernels (your workload's), scheduling each kernel as a Ray "
     "task left 39 % of the pool's GPU-time unused with quotas and 42 % without: a cost per kernel, set by the kernel "
     "length, not by the quota (its own share -5 %, noise ±8 %); 15 % at about 39.3 ms kernels here"),
    ({}, None, "Ray half: not reproduced — at 200 ms kernels (your workload's), scheduling each kernel as a Ray task "
     "left only 6 %"),
    # a GPU's sub-millisecond kernel: shorter than any measured, the shortest's loss is a lower bound
    ({}, _lab00(0.0004), "Ray half: reframed — at 2 ms kernels, the shortest measured (yours, 0.4 ms, is shorter: "
     "the loss there is higher), scheduling each kernel as a Ray task left 68 %"),
    ({}, _lab00(1.0), "Ray half: not reproduced — at 200 ms kernels, the longest measured (yours, 1.00 s, is longer: "
     "the loss there is lower)"),
    # no crossing of 15 % among the lengths measured
    (dict(scheduling_loss=_flat(0.5, 0.5, 0.1)), None, "Ray half: reframed — at 200 ms kernels (your workload's)"),
    # the sweep not run: the saturated runs at the lab's kernel decide, when fine enough
    (dict(scheduling_loss=None, quota_throughput_ratio=0.85, overhead_resolution=0.2 / 4.1), None,
     "Ray half: consistent — scheduling overhead at balanced saturation +15 %"),
    (dict(scheduling_loss=None, quota_throughput_ratio=0.85, overhead_resolution=0.2 / 1.2), None,
     "Ray half: overhead not resolvable in this run — one wave of kernels is 17 %"),
    (dict(scheduling_loss=None, quota_throughput_ratio=0.98), None,
     "Ray half: not reproduced — scheduling overhead +2 % vs the claimed 15 % (at the lab's kernel only"),
    # only the bursty run: it cannot decide (issue 52)
    (dict(scheduling_loss=None, quota_throughput_ratio=None, idle_fraction_fixed=0.2), None,
     "Ray half: not decided — only the bursty-demand run was measured"),
])
def test_c5_each_branch_of_the_rule(changes, lab00, starts):
    numbers = with_("03_quotas", **changes)
    if lab00 is not None:
        numbers["00_measure"] = lab00
    r = verdicts.c5(numbers)
    assert r.verdict.startswith(starts), r.verdict
    assert "Kubernetes half: documented" in r.verdict


def test_c5_no_crossing_is_said():
    r = verdicts.c5(with_("03_quotas", scheduling_loss=_flat(0.5, 0.5, 0.1)))
    assert "; not 15 % at any kernel length measured (2 ms–200 ms)" in r.verdict


@pytest.mark.parametrize("idle", [0.05, 0.1875, 0.37])
def test_c5_the_idle_gpu_time_of_the_bursty_plan_never_decides(idle):
    """The bursty plan's idle share is fixed by the plan (about 3/16 by construction): whatever it reads, the
    verdict follows the per-task scheduling measured at the workload's kernel."""
    r = verdicts.c5(with_("03_quotas", idle_fraction_fixed=idle))
    assert r.verdict.startswith("Ray half: not reproduced — at 200 ms kernels"), r.verdict


def test_c5_plausible_numbers_here_reach_two_verdicts():
    """Principle 12, measured here, not recalled: this machine's real image kernel (lab 00's, at batch 256,
    timed as lab 00 times it) and a longer per-batch kernel (0.5 s: a bigger model's batch) are each run as
    emulated kernels in `tenancy.sweep` on 16 logical GPUs with custom-resource quotas and without, and
    the curve feeds the verdict at each length. Per-task scheduling costs a short kernel far more than 15 %
    and a long one less than 7.5 %, so the same machine reaches "reframed" for the first workload and "not
    reproduced" for the second. Runs here (2026-12-07, 2 shared cores, load average 70-110): the real kernel
    took 14.4 ms and left 56 % of the pool's GPU-time unused with quotas (60 % without), "reframed"; the 0.5 s
    kernel 5 % (13 % without), "not reproduced"; about 52 s with Ray's start."""
    pytest.importorskip("ray")
    import time

    from course import cluster, kernels, tenancy

    batch = kernels.make_batch(256, seed=0)
    kernels.process(batch)  # warm-up
    times = []
    for _ in range(5):
        t = time.perf_counter()
        kernels.process(batch)
        times.append(time.perf_counter() - t)
    real_s = sorted(times)[len(times) // 2]
    try:
        tenancy.start({f"tenant_{t}": q for t, q in tenancy.QUOTAS.items()})
        curve = tenancy.sweep(lambda t: {"resources": {f"tenant_{t}": 1}}, kernels_s=(real_s, 0.5), seconds=1.0,
                              per_window=4)
    finally:
        cluster.stop()
    saved = {"kernel_s": tenancy.KERNEL_S, "scheduling_loss": {str(k): v for k, v in curve.items()}}
    seen = {}
    for kernel_s in (real_s, 0.5):
        numbers = {"00_measure": {"best_batch": 256, "best_images_per_s": 256 / kernel_s}, "03_quotas": saved}
        seen[kernel_s] = verdicts.c5(numbers).verdict.split(" —")[0]
    # the short kernel's outcome is "reframed" (per-task scheduling costs it far more than 7.5 %, quotas or not)
    # or, where the quota's own share lands in the band beyond the rounds' spread, "consistent"
    assert seen[0.5] == "Ray half: not reproduced" and seen[real_s] != seen[0.5], (real_s, curve, seen)


def test_c5_a_tenant_over_its_quota_is_said():
    r = verdicts.c5(with_("03_quotas", quota_peaks={"a": 9, "b": 4, "c": 4}))
    assert "a tenant went over its quota" in r.verdict


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
    slow = {**FULL, "05_capstone": {"pipeline_images_per_s": 120.0, "gpus": 4}}
    r = verdicts.c8(slow)
    assert "on 4 physical GPUs = 30 images/s per GPU" in r.yours
    assert r.verdict.startswith("not reproduced (end to end, per GPU): 0.60×")
    fast = verdicts.c8({**FULL, "05_capstone": {"pipeline_images_per_s": 400.0, "gpus": 2}})
    assert fast.verdict.startswith("holds here (end to end, per GPU): 4× the 50 images/s per GPU")
    assert verdicts.c8({"00_measure": {"best_images_per_s": 40.0}}).verdict.startswith("not testable yet")
    assert "run lab 00" in verdicts.c8({}).yours


@pytest.mark.parametrize("lab00", [{"best_images_per_s": 40.0}, {"best_images_per_s": 1e6},
                                   {"kernel_images_per_s": {"1": 10.0, "256": 9e5}}])
def test_c8_never_decides_on_lab00_alone(lab00):
    """Lab 00's kernel rate is compute only: a verdict either way needs the capstone's pipeline."""
    r = verdicts.c8({"00_measure": lab00})
    assert r.verdict.startswith("not testable yet") and "measured so far" in r.verdict
    assert "holds" not in r.verdict and "not reproduced" not in r.verdict


# --- C8: the unit is a physical GPU, or says what it is ------------------------------------

# What the capstone saves on this kit's machine: 2 cores, no GPU, REPLICAS = 2 logical GPUs, a
# timed run of 384 images (solutions/05_capstone, section 5).
ON_THIS_MACHINE = {"gpus": 0, "cpu_cores": 2, "replicas": 2, "pipeline_images": 384, "model_load_s": 0.5,
                   "image_px": 224, "model_mflop_per_image": 20.3, "c8_gpus": 140, "c8_limit": "cpu"}


@pytest.mark.parametrize("rate, starts", [
    # plausible on the 2-core machine: two notebook runs measured 111 and 81 images/s (load average 3-20), and
    # 20, 49, 64, 68 in four runs with a load average near 19 (other work sharing the 2 cores)
    (95.0, "holds here (end to end, per machine of 2 CPU cores, no GPU): 1.9× the 50 images/s per GPU"),
    (35.0, "not reproduced (end to end, per machine of 2 CPU cores, no GPU): 0.70× the 50 images/s per GPU"),
])
def test_c8_on_this_machine_reaches_either_verdict_and_names_its_unit(rate, starts):
    r = verdicts.c8({**FULL, "05_capstone": {**ON_THIS_MACHINE, "pipeline_images_per_s": rate}})
    assert r.verdict.startswith(starts), r.verdict
    assert "no GPU, 2 CPU cores and 2 model replicas on logical GPUs sharing them" in r.yours
    assert "the unit is the whole machine standing in for one GPU" in r.yours and "per device" not in r.yours
    assert ("timed end to end over 384 images: making the JPEGs, starting Ray Data's pool, one model load "
            "(500 ms), decoding and the network") in r.yours
    assert "140 devices like this machine for 10k images/s" in r.yours


def test_c8_divides_by_physical_gpus_not_by_the_replicas_sharing_them():
    """Two replicas on one GPU (num_gpus = 0.5 each) are one GPU's rate, not two."""
    shared = verdicts.c8({**FULL, "05_capstone": {"pipeline_images_per_s": 80.0, "gpus": 1, "replicas": 2}})
    assert "80 images/s on 1 physical GPU, 2 model replicas sharing it = 80 images/s per GPU" in shared.yours
    assert shared.verdict.startswith("holds here (end to end, per GPU): 1.6×")
    assert verdicts.c8({**FULL, "05_capstone": {"pipeline_images_per_s": 80.0, "gpus": 2, "replicas": 2}}
                       ).verdict.startswith("not reproduced (end to end, per GPU): 0.80×")


def test_c8_says_200_gpus_assume_linear_scaling_which_c1_questions():
    for cap in ({"pipeline_images_per_s": 400.0, "gpus": 2}, {"pipeline_images_per_s": 40.0, "gpus": 2}):
        r = verdicts.c8({**FULL, "05_capstone": cap})
        assert r.verdict.endswith("200 GPUs doing 200× one GPU's rate assumes linear scaling, which C1 questions "
                                  "(lab 01: efficiency 0.20 on 8 emulated GPUs)"), r.verdict
    alone = verdicts.c8({"05_capstone": {"pipeline_images_per_s": 400.0, "gpus": 2}})
    assert alone.verdict.endswith("assumes linear scaling, which C1 questions")


def test_c8_without_the_gpu_count_is_not_testable():
    """A file saved before the count was kept: its 'devices' were replicas, so no per-GPU rate."""
    old = verdicts.c8({**FULL, "05_capstone": {"pipeline_images_per_s": 400.0, "devices": 2}})
    assert old.verdict.startswith("not testable yet — the saved file does not say how many physical GPUs")
    assert "holds" not in old.verdict and "not reproduced" not in old.verdict


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


# --- principle 12: plausible numbers reach more than one verdict (issue 52) -------------------
# HERE is what labs 01, 02 and 04 saved when executed end to end on the kit's 2-core, no-GPU test
# machine (NumPy, under the load of other jobs; 2026-12-07). Each test below sets it beside another
# plausible measurement and asserts the verdicts differ; where the second one was not measured on this
# machine the test says so, and where no plausible number changes the outcome the test pins that.

HERE = {
    "01_actor_scaling": {"call_p50_s": 0.00083, "call_p99_s": 0.00442, "call_overhead_s": 0.000508,
                         "fleet_size": 8, "short_kernel_s": 0.002, "long_kernel_s": 0.05,
                         "efficiency_short": 0.481, "efficiency_long": 0.970, "efficiency_spread": 0.189,
                         "knee_actors": 8, "knee_actors_long": None},
    "02_restart_recovery": {"restart_p50_s": 1.007, "restart_p95_s": 1.309, "cold_start_s": 0.730,
                            "lineage_rebuilt": ["task output"], "lineage_lost": ["owner on lost node", "actor call output"],
                            "at_most_once_lost": 1, "at_least_once_duplicates": 1,
                            "exactly_once_duplicates": 0, "exactly_once_missing": 0},
    "04_data_affinity": {"nodes": 4, "input_bytes": 50331648, "locality_fraction": 1.0,
                         "locality_fraction_naive": 0.5, "locality_fraction_tasks": 0.917,
                         "cross_node_bytes_naive": 25165824.0, "cross_node_bytes_aware": 0.0,
                         "cross_node_bytes_tasks": 4194304.0},
}


def here(lab, **changes):
    return {**HERE, lab: {**HERE[lab], **changes}}


def test_c1_plausible_fleets_reach_two_outcomes():
    """Lab 01's run here: 0.97 vs 0.48 against a ±0.37 noise (spread 0.19) -- work per call set the limit;
    a second run gave 0.98 vs 0.47 with a spread of 0.05, the same outcome. The same difference with a
    spread of 0.26 (noise ±0.50) cannot be told from noise -- a spread not measured here (0.19 and 0.05
    were): with these kernel lengths the fleet's outcome moves with the noise of the repeats, not with the
    machine, and no plausible per-call overhead makes both kernels near-linear (that needs under ~0.1 ms)."""
    measured = verdicts.c1(HERE).verdict
    assert "the 50 ms kernels scaled further than the 2 ms ones (0.97 vs 0.48, beyond the ±0.37 noise)" in measured
    busier = verdicts.c1(here("01_actor_scaling", efficiency_spread=0.26)).verdict
    assert "no clear difference between the kernels (0.97 vs 0.48, within the ±0.50 noise" in busier
    assert verdicts.fleet_shape(HERE["01_actor_scaling"]) == "granularity"
    assert verdicts.fleet_shape(here("01_actor_scaling", efficiency_spread=0.26)["01_actor_scaling"]) == "unclear"


def test_c2_is_not_testable_here_whatever_this_machine_measures():
    """C2's verdict is 'not testable here' by design (one client, one machine); what varies is whether the
    p99 was under the claimed 20 ms. Here it was, in every run (4.42 ms in lab 01; 1.09, 1.60, 5.12 and
    1.61 ms in four more runs of its cell under load): above 20 ms was not measured on this machine."""
    r = verdicts.c2(HERE)
    assert r.verdict.startswith("Ray half: not testable here") and "4.42 ms, under the claimed 20 ms" in r.verdict
    assert "2.5× the claimed 20 ms" in verdicts.c2(here("01_actor_scaling", call_p99_s=0.05)).verdict  # not measured here


def test_c3_plausible_restarts_and_cold_starts():
    """Here the restart (p50 1.01 s) was slower than a cold process start (0.73 s); with the design notes'
    p50 of 1.4 s and a cold start of 2.5 s (a GPU machine's, whose cold start pays CUDA and CuPy: not
    measured here) it was below. The Ray half stays 'not reproduced': no plausible restart is ≤ 60 ms."""
    measured = verdicts.c3(HERE).verdict
    assert "not reproduced — p50 = 34× the claim; not below this machine's cold process start (730 ms)" in measured
    other = verdicts.c3(here("02_restart_recovery", restart_p50_s=1.4, cold_start_s=2.5)).verdict
    assert "; below this machine's cold process start (2.50 s)" in other


def test_c4_plausible_workers_reach_two_verdicts():
    """The same run measured a worker without idempotence (retries on: 1 effect applied twice) beside
    the solution's (0 twice, 0 missing): a learner's worker like the first gets the other verdict."""
    assert verdicts.c4(HERE).verdict.endswith("(yours: exactly once)")
    naive = here("02_restart_recovery", exactly_once_duplicates=HERE["02_restart_recovery"]["at_least_once_duplicates"])
    assert verdicts.c4(naive).verdict.endswith("(yours: not yet exactly once)")


def test_c6_plausible_placements_reach_two_verdicts():
    """Here the naive actors kept 0.50 in place (extra traffic 50 %: within 2× of the claimed 30 %); a
    placement that keeps 1/4 on 4 nodes, as the docstring's expectation and FULL have it, moves 75 %.
    'Ray does not move data' is refuted whenever naive actors move anything, which on 4 nodes they do."""
    assert verdicts.c6(HERE).verdict == "refuted: Ray moved 24.0 MiB itself; ~30 % consistent here (within 2×)"
    assert "~30 % not reproduced — 75 % of the input" in verdicts.c6(FULL).verdict


def test_c7_plausible_localities_reach_two_verdicts():
    """Here tasks kept 0.92 in place against the naive actors' 0.50; a run whose tasks spill off their data's
    node (a preference, not a promise) as far as the actors' locality gets the other verdict -- not measured
    here. 'Not observed' needs naive actors that move nothing, which 4 nodes do not give."""
    assert verdicts.c7(HERE).verdict.endswith("it places tasks, not actors, by their data")
    spilled = verdicts.c7(here("04_data_affinity", locality_fraction_tasks=0.5)).verdict
    assert spilled == ("reframed in part: Ray moves the data to your actors; this run did not show tasks placed "
                       "by their data (locality 0.50 vs the actors' 0.50)")


def test_the_remaining_branches_of_c1_to_c4():
    """Partial numbers give partial rows, never a verdict on what was not measured (issue 52)."""
    no_fit = verdicts.c1(with_("01_actor_scaling", call_overhead_s=None, efficiency_spread=0.05))
    assert "extrapolated" not in no_fit.verdict and "per-call overhead" not in no_fit.yours
    no_long = verdicts.c1(with_("01_actor_scaling", long_kernel_s=None, efficiency_spread=0.05))
    assert "at 500 GPUs efficiency 0.50 with 500 × 1.1 ms" in no_long.verdict and "with long kernels" not in no_long.verdict
    no_p50 = verdicts.c2(with_("01_actor_scaling", call_p50_s=None))
    assert no_p50.yours == "one blocking actor call: p99 3 ms (one client, one machine)"
    no_p95 = verdicts.c3(with_("02_restart_recovery", restart_p95_s=None))
    assert no_p95.yours.startswith("SIGKILL → answered again: p50 1.40 s;")
    lost_all = verdicts.c4(with_("02_restart_recovery", lineage_rebuilt=[], lineage_lost=["task output"]))
    assert lost_all.verdict == "reframed: lineage did not rebuild the task output here either; see what was lost"
    no_eo = verdicts.c4(with_("02_restart_recovery", exactly_once_duplicates=None))
    assert "yours" not in no_eo.verdict and "sequence-numbered" not in no_eo.yours


def test_c8_divides_by_the_gpus_the_replicas_held_on_a_host_with_more():
    """2 replicas on an 8-GPU host hold 2 GPUs (each at most one): per GPU is the rate / 2, not / 8."""
    r = verdicts.c8({**FULL, "05_capstone": {"pipeline_images_per_s": 160.0, "gpus": 8, "gpus_used": 2,
                                             "replicas": 2}})
    assert "160 images/s on 2 of this machine's 8 physical GPUs (the ones its replicas held)" in r.yours
    assert "= 80 images/s per GPU" in r.yours
    assert r.verdict.startswith("holds here (end to end, per GPU used): 1.6× the 50 images/s per GPU")
    old = verdicts.c8({**FULL, "05_capstone": {"pipeline_images_per_s": 160.0, "gpus": 8, "replicas": 2}})
    assert "= 20 images/s per GPU" in old.yours  # a file without gpus_used: every physical GPU


def test_a_pool_of_replicas_holds_at_most_one_gpu_each_on_a_fake_8_gpu_host(monkeypatch):
    from course import backend, fleet, pipeline

    monkeypatch.setattr(backend, "on_gpu", lambda: True)
    monkeypatch.setattr(fleet, "real_devices", lambda: 8)
    assert pipeline.actor_options(2) == {"num_gpus": 1.0, "num_cpus": 0}
    assert [pipeline.gpus_used(n) for n in (1, 2, 8, 16)] == [1, 2, 8, 8]
    monkeypatch.setattr(backend, "on_gpu", lambda: False)
    assert pipeline.gpus_used(2) == 0
