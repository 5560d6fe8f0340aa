"""``python -m autograder release DIR``: the student bundle an instructor hands to a cohort.

It holds what a learner needs and nothing that answers a lab: the learner notebooks
(``labs/``, which nbgrader generated without solutions or hidden tests), the course library
``course/``, and the autograder without its reference implementations -- enough for
``autograder.check()`` and ``python -m autograder check`` to run every check that does not
need the reference (the others are named as measured only by the instructor's grading).
The bundle installs with pip like the kit itself (same ``pyproject.toml`` and ``setup.py``, which
puts the learner notebooks in the wheel: each check's points are read from their test cells).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .grader.errors import SetupError
from .grader.nbgrading.nbgrader_run import KIT_ROOT

LEFT_OUT = ("reference", "__pycache__", "*.pyc")  # inside autograder/ and course/
BUILD = ("pyproject.toml", "setup.py")  # how the bundle installs, as the kit does
ANSWER_MARKS = ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS", "autograder.grade(")

README = """\
# Ray vs Kubernetes for GPU workloads, measured -- student bundle

The labs of this course, for a cohort: your instructor grades your notebooks by re-measuring
your code. This bundle has no solutions, hidden tests or reference implementations.

```bash
pip install ".[lab]" && jupyter lab labs/
```

Self-check a lab before you submit it: run `autograder.check()` in a notebook cell, or

```bash
python -m autograder check labs/00_measure/00_measure.ipynb
```

It runs your notebook and then every check that does not need the reference solutions, on
your notebook's own objects. Checks that compare your code with the reference side by side
(speed tiers, mostly) are listed as `SKIP`: only your instructor's grading measures them.
"""


def release(dest: Path, root: Path = KIT_ROOT) -> list[Path]:
    """Write the student bundle into ``dest`` (new or empty); the files written."""
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise SetupError(f"{dest} is not empty: the bundle goes into a new or empty folder")
    if not (root / "labs").is_dir():
        raise SetupError(f"{root} has no labs/: release from the instructor's kit (a clone of the repository)")
    ignore = shutil.ignore_patterns(*LEFT_OUT)
    dest.mkdir(parents=True, exist_ok=True)
    for folder in ("labs", "course", "autograder"):
        shutil.copytree(root / folder, dest / folder, ignore=ignore)
    for name in BUILD:
        shutil.copy(root / name, dest)
    (dest / "README.md").write_text(README)
    written = sorted(p for p in dest.rglob("*") if p.is_file())
    leaks = [str(p.relative_to(dest)) for p in written if any(m in p.read_text(errors="ignore") for m in ANSWER_MARKS)
             and p.suffix == ".ipynb"]
    if leaks:
        shutil.rmtree(dest)
        raise SetupError(f"labs/ holds solutions or hidden tests ({', '.join(leaks)}): "
                         "regenerate it with `nbgrader generate_assignment LAB --force`")
    return written


def run(dest: Path) -> int:
    """Write the bundle and say what it holds."""
    written = release(dest)
    notebooks = [p for p in written if p.suffix == ".ipynb"]
    print(f"wrote {dest}: {len(notebooks)} learner notebooks, course/, autograder/ without reference/ "
          f"({len(written)} files); no solutions/, no hidden tests")
    return 0
