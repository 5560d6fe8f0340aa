"""Each lab's spec is one frozen, typed ``LabSpec`` (autograder/labs/__init__.py): the grader reads
its fields, never loose module constants, and a wrong value fails when the lab is imported rather
than silently falling back to a default."""

from __future__ import annotations

import dataclasses

import pytest

from autograder import labs
from autograder.labs import LabSpec, UnknownLab


def test_every_lab_states_its_spec_once_as_a_frozen_labspec():
    for lab in labs.all_labs():
        spec = labs.spec(lab)
        assert isinstance(spec, LabSpec) and spec.lab == lab
        with pytest.raises(dataclasses.FrozenInstanceError):
            spec.ray = not spec.ray
        package = __import__(labs.module_name(lab), fromlist=["LAB"])
        assert package.LAB is spec.lab  # the id, derived from the spec, not typed twice


def test_the_facts_the_grader_reads_come_from_the_spec():
    assert labs.min_slot_cores("01_actor_scaling") == 2 and labs.min_slot_cores("00_measure") == 1
    assert labs.pauses_learner("04_data_affinity") == "idle" and labs.pauses_learner("00_measure") is None
    assert labs.ray_start("04_data_affinity") == "emulated_cluster"
    assert labs.own_reference_ray("05_capstone") and not labs.needs_ray("03_quotas")
    with pytest.raises(UnknownLab):
        labs.spec("99_nothing")


@pytest.mark.parametrize("bad, match", [
    (dict(lab="measure"), "NN_name"),
    (dict(lab="07_x", reference_ray="mine"), "reference_ray"),
    (dict(lab="07_x", reference_ray="own"), "needs the lab's Ray"),
    (dict(lab="07_x", ray=True, pause_learner="sleep"), "pause_learner"),
    (dict(lab="07_x", min_slot_cores=0), "min_slot_cores"),
    (dict(lab="07_x", min_slot_cores=True), "min_slot_cores"),
    (dict(lab="07_x", learner_names=("run pool",)), "learner_names"),
])
def test_a_wrong_value_fails_when_the_spec_is_made(bad, match):
    with pytest.raises(ValueError, match=match):
        LabSpec(**bad)
