"""Measurement discipline: medians of synchronised repeats, interleaved ratios."""

import time

import pytest

from course import backend, bench


def sleeper(seconds):
    return lambda: time.sleep(seconds)


def test_measure_rate_of_a_known_cost():
    m = bench.measure(sleeper(0.01), items=5, warmup=1, min_repeats=5, budget_s=0.5)
    assert len(m.warmup) == 1 and len(m.samples) >= 5
    assert m.rate == pytest.approx(500, rel=0.15)
    assert "items/s" in str(m)


def test_measure_synchronises_deferred_work():
    def launch():
        backend.defer(lambda: time.sleep(0.01))

    assert bench.measure(launch, min_repeats=3, budget_s=0.3).median >= 0.009
    assert bench.measure(launch, min_repeats=3, budget_s=0.3, sync=False).median < 0.005
    backend.sync()


def test_measure_stops_at_the_budget():
    calls = []

    def noisy():
        calls.append(1)
        time.sleep(0.001 if len(calls) % 2 else 0.01)

    start = time.perf_counter()
    m = bench.measure(noisy, warmup=0, min_repeats=3, budget_s=0.2, target_spread=0.0)
    assert time.perf_counter() - start < 1.0 and len(m.samples) < 100


def test_median_ignores_outliers_the_mean_does_not():
    samples = [0.01] * 9 + [1.0]
    assert bench.Measurement(samples).median == 0.01
    assert bench.relative_spread(samples) == 0.0
    assert bench.relative_spread([1.0]) == 0.0


def test_compare_interleaves_and_reports_the_ratio():
    cmp = bench.compare(sleeper(0.004), sleeper(0.008), rounds=5)
    assert len(cmp.ratios) == 5
    assert cmp.ratio == pytest.approx(2.0, rel=0.2)
    same = bench.compare(sleeper(0.004), sleeper(0.004), items_a=3, rounds=5)
    assert same.ratio == pytest.approx(1.0, rel=0.2)
    assert "A/B" in str(same)


def test_compare_accounts_for_items_per_call():
    cmp = bench.compare(sleeper(0.008), sleeper(0.004), items_a=4, items_b=1, rounds=3)
    assert cmp.ratio == pytest.approx(2.0, rel=0.2)


def test_compare_alternates_who_goes_first():
    order = []
    bench.compare(lambda: order.append("a"), lambda: order.append("b"), rounds=4, warmup=0, sync=False)
    assert order == ["a", "b", "b", "a", "a", "b", "b", "a"]


def test_interleaved_measures_every_callable_in_each_round_reversing_the_order():
    order = []
    fns = {k: (lambda k=k: order.append(k), items) for k, items in (("a", 1), ("b", 2), ("c", 4))}
    out = bench.interleaved(fns, rounds=3, warmup=1)
    assert order == list("abc") + list("abc") + list("cba") + list("abc")  # warm-up, then rounds 0, 1, 2
    assert {k: len(m.samples) for k, m in out.items()} == {"a": 3, "b": 3, "c": 3}
    assert out["c"].items == 4


def test_interleaved_ranks_known_costs():
    out = bench.interleaved({n: (lambda n=n: time.sleep(0.002 * n), 1) for n in (1, 3)}, rounds=3, warmup=0)
    assert out[1].rate > 2 * out[3].rate


def test_steady_allocator_applies_on_glibc():
    import platform

    assert bench.steady_allocator() == (platform.libc_ver()[0] == "glibc")
