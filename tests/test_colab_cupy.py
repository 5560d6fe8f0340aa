"""Colab's GPU runtime ships CuPy (cupy-cuda12x, ../shared/colab/pip-freeze.gpu.txt): the setup
cell must not reinstall or downgrade it, and the kit must use the CuPy that is there.

Checked without Colab: the setup cell's command, and pip's resolver run dry (``--dry-run
--report``) for Colab's Python 3.13 and platform with every version Colab pins as a constraint
but :data:`UPGRADES` -- a requirement of the kit that needed another version of any other
preinstalled package (CuPy, NumPy, CUDA's libraries, the kernel stack) makes the resolution fail.
Not checked: the install on Colab itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import colab
from course import backend
from test_colab import FREEZE, ROOT, _pins as colab_pins

# The preinstalled packages the setup cell does upgrade on Colab, and why (found by this resolution:
# with these held too, pip reports the conflict named). Neither is under CuPy or the kernel stack.
UPGRADES = {"aiohttp": "ray[default] 2.60 needs aiohttp>=3.14.4; Colab pins 3.14.3",
            "yarl": "aiohttp 3.14.4+ needs yarl>=1.25.1; Colab pins 1.24.5"}


def _pins() -> dict[str, str]:
    """Colab's ``name==version`` pins, names normalised (tests/test_colab.py reads them)."""
    if not FREEZE.exists():
        pytest.skip("no ../shared/colab here")
    return colab_pins()


def _base() -> list[str]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]


def _resolve(requirements: list[str], tmp_path: Path) -> dict[str, str]:
    """What pip would install for ``requirements`` on Colab's Python and platform, with every
    package Colab pins but :data:`UPGRADES` held at Colab's version: {name: version}."""
    pins = _pins()
    constraints = tmp_path / "colab-constraints.txt"
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in pins.items() if n not in UPGRADES))
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--dry-run",
           "--ignore-installed", "--report", str(report), "--target", str(tmp_path / "target"),
           "--python-version", "3.13", "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64",
           "--only-binary=:all:", "-c", str(constraints), *requirements]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"pip could not resolve against Colab's pins:\n{out.stderr[-3000:]}"
    return {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
            for i in json.loads(report.read_text())["install"]}


def test_the_setup_cell_installs_the_base_only_and_never_forces():
    """No extra (the ``gpu`` extra would name cupy-cuda12x), no upgrade or reinstall flags: pip
    keeps every installed package that satisfies the kit."""
    src = colab.setup_source()
    command = next(ln for ln in src.splitlines() if "pip" in ln and "install" in ln)
    for flag in ("-U", "--upgrade", "--force-reinstall", "--ignore-installed", "--no-deps", "cupy"):
        assert flag not in command.split() and flag not in src.replace("course kit", ""), flag
    assert "[" not in colab.settings()["source"], "the setup cell's source must not name an extra"


@pytest.mark.slow
def test_installing_the_kit_on_colab_keeps_its_cupy_numpy_and_kernel_stack(tmp_path):
    """The base install resolves with every Colab pin but :data:`UPGRADES` held, so it keeps
    Colab's NumPy, CuPy, CUDA libraries and kernel stack, and pulls no CuPy or CUDA wheel."""
    pins = _pins()
    got = _resolve(_base(), tmp_path)
    assert not [n for n in got if n.startswith(("cupy", "nvidia-"))], got
    assert got.get("numpy") == pins["numpy"]
    changed = {n: (pins[n], v) for n, v in got.items() if n in pins and pins[n] != v}
    assert set(changed) <= set(UPGRADES), changed


@pytest.mark.slow
def test_the_gpu_extra_accepts_colabs_cupy(tmp_path):
    """``pip install kit[gpu]`` on Colab would keep cupy-cuda12x as Colab has it."""
    pins = _pins()
    gpu = [r for r in _gpu_extra() if r.startswith("cupy")]
    got = _resolve(gpu + ["numpy>=1.26"], tmp_path)
    assert got["cupy-cuda12x"] == pins["cupy-cuda12x"]


def _gpu_extra() -> list[str]:
    try:
        import tomllib
    except ModuleNotFoundError:
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]


def test_the_kit_uses_the_installed_cupy_whatever_its_wheel_name():
    """The backend imports the module ``cupy``: Colab's cupy-cuda12x, the lent machine's
    cupy-cuda13x or a conda build all provide it; nothing in the kit names a wheel at run time."""
    cupy = pytest.importorskip("cupy")
    usable, why = backend.gpu_status()
    assert usable or why.startswith("cupy is installed but"), why
    assert Path(cupy.__file__).parent.name == "cupy"
    for path in (ROOT / "course").glob("*.py"):
        assert "cupy-cuda" not in path.read_text(), path
