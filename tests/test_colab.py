"""Each lab's setup cell and "Open in Colab" badge come from pyproject's [tool.course-kit]."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

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
    # the README's lab table, which the documentation site includes (docs/learners/labs.md)
    assert colab.badge(lab) in _readme_lab_table()
    assert '--8<-- "README.md:labs"' in (ROOT / "docs" / "learners" / "labs.md").read_text()


def _readme_lab_table() -> str:
    text = (ROOT / "README.md").read_text()
    start, end = text.index("--8<-- [start:labs]"), text.index("--8<-- [end:labs]")
    return text[start:end]


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


# -- a Colab-like runtime ------------------------------------------------------------------

FREEZE = ROOT.parent / "shared" / "colab" / "pip-freeze.gpu.txt"  # Colab's published GPU image
KERNEL_STACK = ("ipython", "ipykernel", "traitlets", "notebook", "tornado", "pyzmq", "jupyter-client",
                "jupyter-core")
PREINSTALLED = ("numpy", "matplotlib", "tqdm", "pyyaml", "nbclient", "nbformat", "psutil", "packaging")


def _pins() -> dict[str, str]:
    """Colab's ``name==version`` lines, names normalised (its ``@ file`` lines cannot install here)."""
    pins = {}
    for line in FREEZE.read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep and "@" not in line:
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    return pins


def _installed(python: Path, site: str) -> dict[str, str]:
    out = subprocess.run([str(python), "-m", "pip", "list", "--path", site, "--format=json"],
                         capture_output=True, text=True, check=True).stdout
    return {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(out)}


def _gone(marker: str, wait_s: float = 30) -> bool:
    """Whether every process whose command line names ``marker`` has exited (within ``wait_s``)."""
    deadline = time.monotonic() + wait_s
    while True:
        left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _names(p, marker)]
        if not left or time.monotonic() > deadline:
            return not left
        time.sleep(0.5)


def _names(proc: Path, marker: str) -> bool:
    try:
        return marker.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


@pytest.mark.slow
def test_in_a_colab_like_venv_the_setup_cell_installs_the_kit_and_lab00_self_checks(tmp_path):
    """A venv with Colab's kernel stack and the packages the kit imports, at Colab's versions
    (``../shared/colab/pip-freeze.gpu.txt``; Python 3.11 here, Colab has 3.13), and this machine's
    other packages behind them (a .pth file: Ray is not on Colab and would be downloaded there).
    Lab 00's own setup cell installs the kit from this checkout in that venv's kernel, without
    changing one pinned package; then the lab runs to the end and ``autograder.check()`` scores it."""
    import nbformat
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager
    from nbclient import NotebookClient

    if not FREEZE.exists():
        pytest.skip("no ../shared/colab here")
    pins = _pins()
    venv, python = tmp_path / "venv", tmp_path / "venv" / "bin" / "python"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    (tmp_path / "constraints.txt").write_text("".join(f"{n}=={v}\n" for n, v in pins.items()))
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-c", str(tmp_path / "constraints.txt"),
                    *KERNEL_STACK, *PREINSTALLED], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    before = _installed(python, site)
    assert all(before[n] == pins[n] for n in KERNEL_STACK + PREINSTALLED)
    Path(site, "zz-this-machine.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    kernels = tmp_path / "kernels" / "colab"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Colab-like", "language": "python"}))
    nb = nbformat.read(solution("00_measure"), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("autograder.check()"))
    km = KernelManager(kernel_name="colab", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels.parent)]))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "RAY_ADDRESS")}
    work = tmp_path / "content"  # Colab's working directory holds no kit
    work.mkdir()
    started = time.monotonic()
    try:
        NotebookClient(nb, km=km, timeout=600, resources={"metadata": {"path": str(work)}}).execute(
            env={**env, "COURSE_KIT_SOURCE": str(ROOT)})
    finally:  # nbclient leaves a kernel it was handed running (it owns only those it starts)
        if km.has_kernel:
            km.shutdown_kernel()
    seconds = time.monotonic() - started
    assert _gone(str(venv)), "the Colab-like kernel left processes running"
    errors = [(i, o.get("ename"), o.get("evalue")) for i, c in enumerate(nb.cells) if c.cell_type == "code"
              for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    setup = "".join(o.get("text", "") for o in nb.cells[[c.cell_type for c in nb.cells].index("code")].outputs)
    assert "installing the course kit" in setup
    report = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    assert "score: 14/14" in report, report[-2000:]
    after = _installed(python, site)
    changed = {n: (v, after.get(n)) for n, v in before.items() if after.get(n) != v}
    assert not changed, f"the setup cell changed Colab's packages: {changed}"
    assert "ray-vs-k8s-gpu-course" in after
    print(f"setup cell to last cell: {seconds:.0f} s")

    # the lab kept its numbers next to the notebook, and the course report renders from them
    subprocess.run([sys.executable, "-m", "course.report", str(work)], check=True, capture_output=True)
    kept = json.loads((work / "results" / "00_measure.json").read_text())["numbers"]
    assert kept["backend"] == "numpy" and len(kept["kernel_images_per_s"]) >= 3, kept
    page = (work / "report.html").read_text()
    assert "C8" in page and "data:image/png;base64," in page and "not measured yet" in page  # labs 01-05 not run
