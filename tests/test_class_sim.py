"""A class at a deadline through the grading service, simulated on an emulated Ray cluster
(tests/class_sim.py says what is real and what stands in): nothing lost, fair order and one
grading per student at a time held, every student shown an estimated wait from the first
submission on, and the class graded near the bound of its work over the slots."""

from __future__ import annotations

import pytest

import class_sim
from notebooks import only_extended


def _held(result: dict, makespan_over_bound: float) -> None:
    assert result["lost"] == 0 and result["graded"] + result["replaced"] == result["submissions"], result
    assert result["unfair"] == 0 and result["overlapping"] == 0, result
    assert result["estimates_unknown"] == 0 and result["estimates"] == result["graded"], result
    assert result["makespan_over_bound"] <= makespan_over_bound, result


@pytest.mark.slow
def test_a_small_class_at_a_deadline(tmp_path):
    """24 students on one node of 4 slots (a raylet of its own starts in seconds; the extended
    set's cluster has 16), time 40x faster: a loaded 2-core CI machine delays the stand-in
    gradings, so the makespan is held to 1.5x its bound here (the extended set holds a class of
    300 to the goal)."""
    result = class_sim.run(students=24, nodes=1, slots=4, speed=40, tmp=tmp_path)
    print(result)
    _held(result, 1.5)


@pytest.mark.slow
@only_extended("a class of 24 on one node")
def test_a_class_of_300_at_a_deadline_on_16_nodes(tmp_path):
    """The class of issue 53: 300 students, each submitting once or twice in the last 10
    minutes, on 16 nodes x 2 slots."""
    result = class_sim.run(students=300, nodes=16, slots=2, speed=20, tmp=tmp_path)
    print(result)
    _held(result, 1.10)
