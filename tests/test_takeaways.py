"""course.takeaways: each lab's closing bullets come from the learner's numbers (no Ray)."""

from __future__ import annotations

import pytest

from course import takeaways
from test_verdicts import FULL as VERDICTS_FULL

FULL = {**VERDICTS_FULL,
        "00_measure": {**VERDICTS_FULL["00_measure"], "best_images_per_s": 7100.0, "best_batch": 256},
        "03_quotas": {**VERDICTS_FULL["03_quotas"], "isolation_none": 0.4, "isolation_quota": 0.95}}


def with_(lab, **changes):
    return {**FULL, lab: {**FULL[lab], **changes}}


@pytest.mark.parametrize("lab", list(takeaways.RULES))
def test_three_to_five_bullets_from_the_numbers(lab):
    got = takeaways.bullets(lab, FULL)
    assert 3 <= len(got) <= 5, got
    assert "not measured yet" not in " ".join(got)
    assert takeaways.markdown(lab, FULL).startswith("### What your numbers showed\n\n* ")


@pytest.mark.parametrize("lab", list(takeaways.RULES))
def test_nothing_measured_never_raises_and_says_what_to_run(lab):
    for numbers in ({}, None, {lab: {}}):
        got = takeaways.bullets(lab, numbers)
        assert got and all("not measured yet" in b for b in got), got


def test_bullets_follow_the_numbers_not_fixed_text():
    a = takeaways.bullets("02_restart_recovery", FULL)[0]
    b = takeaways.bullets("02_restart_recovery", with_("02_restart_recovery", restart_p50_s=0.06))[0]
    assert "1.40 s" in a and "47×" in a and "60 ms" in b and "2×" in b
    q = takeaways.bullets("03_quotas", with_("03_quotas", overhead_resolution=0.05))
    assert any("steps of 5 %" in s for s in q)
    assert "7,000 images/s at 256" in takeaways.bullets("00_measure", FULL)[1]


def test_conclusions_are_drawn_from_the_numbers_not_assumed():
    # lab 00: batching is said to help only when it did
    flat = takeaways.bullets("00_measure", with_("00_measure", kernel_images_per_s={"1": 900.0, "16": 800.0}))[1]
    assert flat.startswith("Batching did not raise the rate here: 900 images/s at 1 image")
    assert takeaways.bullets("00_measure", FULL)[1].startswith("Batching raised the rate 7.8×")
    # lab 01: the kernel length is said to set the knee only when the longer kernels scaled further
    eff = [b for b in takeaways.bullets("01_actor_scaling", FULL) if b.startswith("On 8 emulated GPUs")][0]
    assert "0.20 with 2 ms kernels and 0.90 with 50 ms kernels: the longer kernels scaled further" in eff
    worse = [b for b in takeaways.bullets("01_actor_scaling", with_("01_actor_scaling", efficiency_long=0.1))
             if b.startswith("On 8")][0]
    assert "did not scale further" in worse
    both = [b for b in takeaways.bullets("01_actor_scaling", with_("01_actor_scaling", efficiency_short=0.85))
            if b.startswith("On 8")][0]
    assert "both stayed near-linear" in both
    # lab 04: a localhost rate is not compared with data-centre networks
    link = takeaways.bullets("04_data_affinity", with_("04_data_affinity", link_bytes_per_s=2e9))
    assert any("2,000 MB/s: localhost on this machine, not a data-centre network" in b for b in link)
