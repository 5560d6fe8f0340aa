"""A lab opened where the kit is not installed (a fresh Colab runtime): its setup cell and badge.

Both are made from one setting, ``[tool.course-kit]`` in ``pyproject.toml``: ``source`` (the
pip requirement a setup cell installs) and ``repository`` and ``branch`` (where "Open in Colab"
opens a lab from). ``python -m autograder colab`` writes them into every ``solutions/``
notebook -- the setup cell first among the code cells, the badge under the title -- and the
README's lab table (the one table of labs: the documentation site includes it, between its
``--8<--`` markers, on ``docs/learners/labs.md``); ``nbgrader generate_assignment`` carries
them into ``labs/``. At run time
``COURSE_KIT_SOURCE`` overrides the source (the tests point it at a local checkout).
"""

from __future__ import annotations

import re
from pathlib import Path

from .grader.nbgrading.nbgrader_run import KIT_ROOT

BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"  # Colab's own badge
SETUP_ID = "install"  # the setup cell's nbgrader grade_id
SETUP = '''\
# Setup, run this first: it installs the course kit where this Jupyter lacks it (a fresh Colab
# runtime) and does nothing where the kit is installed. No runtime restart follows (tested with
# Colab's pinned kernel packages, not on Colab itself).
import importlib, importlib.util, os, subprocess, sys

if importlib.util.find_spec("autograder") is None:
    KIT = os.environ.get("COURSE_KIT_SOURCE", "{source}")
    print("installing the course kit and Ray from", KIT, "...")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", KIT], check=True)
    importlib.invalidate_caches()
'''


def settings(root: Path = KIT_ROOT) -> dict:
    """``[tool.course-kit]`` of the kit's ``pyproject.toml``."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads((root / "pyproject.toml").read_text())["tool"]["course-kit"]


def setup_source(root: Path = KIT_ROOT) -> str:
    """The setup cell's code."""
    return SETUP.format(source=settings(root)["source"])


def colab_url(lab: str, root: Path = KIT_ROOT) -> str:
    """Where Colab opens the learner copy of ``lab`` (Colab's ``/github/OWNER/REPO/blob/BRANCH/PATH``)."""
    s = settings(root)
    return f"https://colab.research.google.com/github/{s['repository']}/blob/{s['branch']}/labs/{lab}/{lab}.ipynb"


def badge(lab: str, root: Path = KIT_ROOT) -> str:
    """The "Open in Colab" badge of ``lab``, in Markdown."""
    return f"[![Open In Colab]({BADGE_IMAGE})]({colab_url(lab, root)})"


def write(root: Path = KIT_ROOT) -> list[Path]:
    """Put the setup cell and the badge into every ``solutions/`` notebook, and the badges into
    the README's lab table (which ``docs/learners/labs.md`` includes); the notebooks changed
    (run ``nbgrader generate_assignment`` next)."""
    import nbformat

    changed = []
    for path in sorted((root / "solutions").glob("*/*.ipynb")):
        lab = path.stem
        nb = nbformat.read(str(path), as_version=4)
        before = nbformat.writes(nb)
        title = nb.cells[0]
        lines = [ln for ln in title.source.splitlines() if not ln.startswith("[![Open In Colab]")]
        title.source = "\n".join(lines[:1] + ["", badge(lab, root)] + lines[1:]).replace("\n\n\n", "\n\n")
        code = [c for c in nb.cells if c.cell_type == "code"]
        if code and code[0].metadata.get("nbgrader", {}).get("grade_id") == SETUP_ID:
            code[0].source = setup_source(root)
        else:
            cell = nbformat.v4.new_code_cell(setup_source(root))
            cell.metadata["nbgrader"] = {"grade": False, "grade_id": SETUP_ID, "locked": True,
                                         "schema_version": 3, "solution": False, "task": False}
            nb.cells.insert(nb.cells.index(code[0]) if code else len(nb.cells), cell)
        if nbformat.writes(nb) != before:
            nbformat.write(nb, str(path))
            changed.append(path)
    readme = root / "README.md"
    text = readme.read_text()
    for path in sorted((root / "solutions").glob("*/*.ipynb")):
        lab = path.stem
        text = re.sub(rf"^\| `{re.escape(lab)}`( \[!\[Open In Colab\]\([^)]*\)\]\([^)]*\))?",
                      f"| `{lab}` {badge(lab, root)}", text, flags=re.M)
    readme.write_text(text)
    return changed


def run() -> int:
    """Write the cells and badges, and say what to do next."""
    changed = write()
    print(f"setup cell and Colab badge written into {len(changed)} notebook(s) of solutions/; now run "
          "`nbgrader generate_assignment LAB --force` for each and commit labs/")
    return 0
