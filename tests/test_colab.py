"""Each lab's setup cell and "Open in Colab" badge come from pyproject's [tool.course-kit]."""

from __future__ import annotations

import json

import pytest

from autograder import colab, selfcheck
from notebooks import ROOT, released, solution

LABS = selfcheck.labs()


@pytest.mark.parametrize("lab", LABS)
def test_every_notebook_starts_with_the_setup_cell_and_its_badge(lab):
    for path in (solution(lab), released(lab)):
        cells = json.loads(path.read_text())["cells"]
        first = next(c for c in cells if c["cell_type"] == "code")
        assert "".join(first["source"]) == colab.setup_source(), f"{path}: run `python -m autograder colab`"
        assert first["metadata"]["nbgrader"]["grade_id"] == colab.SETUP_ID
        assert colab.badge(lab) in "".join(cells[0]["source"])
    assert colab.badge(lab) in (ROOT / "README.md").read_text()


def test_the_setting_is_one_repository():
    s = colab.settings()
    assert s["repository"] in s["source"] and s["branch"]
    assert colab.colab_url("00_measure").startswith("https://colab.research.google.com/github/" + s["repository"])


def test_the_setup_cell_does_nothing_where_the_kit_is_installed(monkeypatch):
    import subprocess

    def refuse(*args, **kwargs):
        raise AssertionError("the setup cell ran pip although the kit is installed")

    monkeypatch.setattr(subprocess, "run", refuse)
    exec(colab.setup_source(), {})
