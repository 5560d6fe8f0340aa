"""course.results: each lab's numbers in one JSON file next to the notebook, and the labs'
given cells that write them (read statically: no kernel, no Ray)."""

from __future__ import annotations

import ast
import json

import numpy as np
import pytest

from course import results
from notebooks import ROOT, solution

LABS_WITH_CELLS = ["00_measure", "01_actor_scaling", "02_restart_recovery", "03_quotas", "04_data_affinity"]


def test_path_is_results_lab_json(tmp_path):
    assert results.path("02_restart_recovery", tmp_path) == tmp_path / "results" / "02_restart_recovery.json"


def test_save_writes_the_record_and_load_reads_the_numbers(tmp_path):
    written = results.save("02_restart_recovery", {"restart_p50_s": 1.4, "restart_p95_s": 2.5}, tmp_path)
    data = json.loads(written.read_text())
    assert data["lab"] == "02_restart_recovery" and data["schema"] == results.SCHEMA_VERSION
    assert data["fingerprint"] and data["saved_at"]
    assert data["numbers"] == {"restart_p50_s": 1.4, "restart_p95_s": 2.5}
    assert results.load("02_restart_recovery", tmp_path) == {"restart_p50_s": 1.4, "restart_p95_s": 2.5}


def test_a_second_save_merges_and_updates(tmp_path):
    results.save("02_restart_recovery", {"restart_p50_s": 1.4, "cold_start_s": 2.0}, tmp_path)
    results.save("02_restart_recovery", {"restart_p50_s": 0.9, "restart_p95_s": 1.1}, tmp_path)
    assert results.load("02_restart_recovery", tmp_path) == {
        "restart_p50_s": 0.9, "restart_p95_s": 1.1, "cold_start_s": 2.0}


def test_a_save_on_another_machine_starts_afresh(tmp_path, monkeypatch):
    results.save("02_restart_recovery", {"restart_p50_s": 1.4, "cold_start_s": 2.0}, tmp_path)
    monkeypatch.setattr(results, "_fingerprint", lambda: "numpy-cpu-64c-other")
    results.save("02_restart_recovery", {"restart_p95_s": 1.1}, tmp_path)
    assert results.load("02_restart_recovery", tmp_path) == {"restart_p95_s": 1.1}


def test_an_unknown_key_or_lab_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="'restart_p50_ms'"):
        results.save("02_restart_recovery", {"restart_p50_ms": 1400}, tmp_path)
    with pytest.raises(ValueError, match="'06_extra'"):
        results.save("06_extra", {}, tmp_path)
    assert not results.path("02_restart_recovery", tmp_path).exists()


def test_values_are_stored_as_plain_json(tmp_path):
    results.save("00_measure", {"image_px": np.int64(64), "best_images_per_s": np.float32(1.5),
                                "kernel_images_per_s": {np.int64(16): np.float64(2.0), "64": float("nan")}}, tmp_path)
    results.save("02_restart_recovery", {"restart_samples_s": np.array([1.0, 2.0]),
                                         "lineage_lost": ("actor call output",)}, tmp_path)
    assert results.load("00_measure", tmp_path) == {"image_px": 64, "best_images_per_s": 1.5,
                                                    "kernel_images_per_s": {"16": 2.0, "64": None}}
    n = results.load("02_restart_recovery", tmp_path)
    assert n == {"restart_samples_s": [1.0, 2.0], "lineage_lost": ["actor call output"]}
    assert type(n["restart_samples_s"][0]) is float
    with pytest.raises(TypeError):
        results.save("02_restart_recovery", {"restart_p50_s": object()}, tmp_path)


def test_lab00_keeps_its_own_fingerprint(tmp_path):
    results.save("00_measure", {"fingerprint": "cupy-h200-16c-abcdef"}, tmp_path)
    assert results.record("00_measure", tmp_path)["fingerprint"] == "cupy-h200-16c-abcdef"


@pytest.mark.parametrize("content", [None, "", "{not json", "[1, 2]",
                                     json.dumps({"lab": "03_quotas", "schema": 1, "numbers": {"nodes": 4}}),
                                     json.dumps({"lab": "04_data_affinity", "schema": 99, "numbers": {"nodes": 4}}),
                                     json.dumps({"lab": "04_data_affinity", "schema": 1, "numbers": [4]})])
def test_load_never_raises(tmp_path, content):
    if content is not None:
        results.path("04_data_affinity", tmp_path).parent.mkdir()
        results.path("04_data_affinity", tmp_path).write_text(content)
    assert results.load("04_data_affinity", tmp_path) == {}


def test_load_keeps_only_schema_keys(tmp_path):
    results.path("04_data_affinity", tmp_path).parent.mkdir()
    results.path("04_data_affinity", tmp_path).write_text(json.dumps(
        {"lab": "04_data_affinity", "schema": 1, "numbers": {"nodes": 4, "bogus": 1}}))
    assert results.load("04_data_affinity", tmp_path) == {"nodes": 4}


def test_load_all_has_every_lab(tmp_path):
    results.save("03_quotas", {"quota_throughput_ratio": 0.97}, tmp_path)
    got = results.load_all(tmp_path)
    assert list(got) == list(results.SCHEMA)
    assert got["03_quotas"] == {"quota_throughput_ratio": 0.97} and got["00_measure"] == {}


def test_the_schema_is_documented_in_the_module_docstring():
    for lab, keys in results.SCHEMA.items():
        assert f"``{lab}``" in results.__doc__
        for key in keys:
            assert f"``{key}``" in results.__doc__, f"{lab}.{key} is not in course/results.py's docstring"


def test_the_names_the_capstone_uses_are_there():
    need = {"00_measure": {"backend", "fingerprint", "image_px", "kernel_images_per_s"},
            "01_actor_scaling": {"call_overhead_s", "actor_images_per_s", "knee_actors"},
            "02_restart_recovery": {"restart_p50_s", "restart_p95_s"},
            "03_quotas": {"quota_throughput_ratio", "tenant_share"},
            "04_data_affinity": {"locality_fraction", "cross_node_bytes_naive", "cross_node_bytes_aware",
                                 "link_bytes_per_s"},
            "05_capstone": {"predicted_images_per_s", "pipeline_images_per_s", "pool_images_per_s"}}
    for lab, keys in need.items():
        assert keys <= set(results.SCHEMA[lab]), lab


# --- the labs' given cells ------------------------------------------------------------------

def _saves(lab):
    """(cell index, lab argument, keys) of every course.results.save(...) call in the solution's
    plain code cells, read from the source."""
    nb = json.loads(solution(lab).read_text())
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        for node in ast.walk(ast.parse("".join(cell["source"]))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "save"
                    and ast.unparse(node.func.value) == "course.results"):
                assert not cell.get("metadata", {}).get("nbgrader", {}).get("solution"), (
                    f"{lab} cell {i}: a save belongs to given code, not to an exercise")
                target, numbers = node.args[:2]
                assert isinstance(target, ast.Constant) and isinstance(numbers, ast.Dict), (
                    f"{lab} cell {i}: save with a literal lab id and a dict literal, so keys can be checked")
                yield i, target.value, [ast.literal_eval(k) for k in numbers.keys]


@pytest.mark.parametrize("lab", LABS_WITH_CELLS)
def test_the_labs_save_only_schema_keys_and_every_key(lab):
    saves = list(_saves(lab))
    assert saves, f"{lab} saves no numbers"
    saved = set()
    for i, target, keys in saves:
        assert target == lab, f"{lab} cell {i} saves into {target}"
        unknown = set(keys) - set(results.SCHEMA[lab])
        assert not unknown, f"{lab} cell {i}: keys not in course.results.SCHEMA: {sorted(unknown)}"
        saved |= set(keys)
    assert saved == set(results.SCHEMA[lab]), f"{lab} never saves {sorted(set(results.SCHEMA[lab]) - saved)}"


@pytest.mark.parametrize("lab", LABS_WITH_CELLS)
def test_the_verdict_cell_reads_the_saved_numbers(lab):
    nb = json.loads(solution(lab).read_text())
    sources = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    assert any(f'course.verdicts.for_lab("{lab}"' in s and "course.results.load" in s for s in sources)


def test_results_folders_are_ignored_by_git():
    assert "results/" in (ROOT / ".gitignore").read_text().split()
