"""The install: pyproject.toml and environment.yml agree, the base is what notebooks import
(Colab's pins kept), nbgrader is configured."""

import re

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import yaml

from notebooks import ROOT


def _norm(req: str) -> str:
    return re.sub(r"\s+", "", req).lower()


def test_environment_yml_lists_the_same_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    assert sorted(map(_norm, project["dependencies"])) == sorted(_norm(p) for p in pip if not p.startswith("-e"))
    assert "-e .[test]" in pip
    python = re.search(r">=\s*([\d.]+)", project["requires-python"]).group(1)
    assert f"python>={python}" in conda


def test_nbgrader_config():
    from traitlets.config import Config

    c = Config()
    exec((ROOT / "nbgrader_config.py").read_text(), {"get_config": lambda: c})
    assert c.CourseDirectory.source_directory == "solutions"
    assert c.CourseDirectory.release_directory == "labs"
    assert 60 <= c.Execute.timeout <= 600


def test_readme_docs_and_ci_run_the_same_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    for page in (ROOT / "README.md", ROOT / "docs" / "learners" / "install.md"):
        for command in ('python -m pip install -e ".[test]"', "python -m pytest"):
            assert command in page.read_text(), page
    assert "python -m pytest" in ci and '-e ".[test]"' in ci


def test_the_docs_extra_builds_the_site_and_the_tests_install_it():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {r.split(">")[0] for r in extras["docs"]} >= {"mkdocs", "mkdocs-material"}
    assert "docs" in re.search(r"\[([\w,]+)\]", extras["test"][0]).group(1).split(",")


def test_the_base_install_is_what_notebooks_import_and_keeps_colabs_pins():
    """Grading and lab tools are extras; every base requirement that names a package Colab's GPU
    runtime pins is satisfied by that pin (``../shared/colab/pip-freeze.gpu.txt``), so pip has no
    reason to touch it."""
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {Requirement(r).name.lower(): Requirement(r) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    assert not {"jupyterlab", "nbgrader", "pytest", "cupy-cuda12x"} & set(base)
    assert any(r.startswith("jupyterlab") for r in extras["lab"]) and any(r.startswith("nbgrader") for r in extras["grade"])
    freeze = ROOT.parent / "shared" / "colab" / "pip-freeze.gpu.txt"
    if not freeze.exists():
        pytest.skip("no ../shared/colab here")
    pins = dict(ln.split("==", 1) for ln in freeze.read_text().splitlines() if "==" in ln)
    pins = {k.lower().replace("_", "-"): v for k, v in pins.items()}
    for name in ("ipython", "ipykernel", "traitlets", "notebook", "tornado", "pyzmq", "jupyter-client"):
        assert name in pins
    for name, req in base.items():
        if name in pins:
            assert req.specifier.contains(pins[name], prereleases=True), f"{req} would change Colab's {name}=={pins[name]}"
