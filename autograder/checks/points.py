"""Each check's points, read from the one place they are written: its test cell's metadata.

The hidden test cell ``test-<name>`` of a lab's notebook carries its ``points`` in its nbgrader
metadata. nbgrader grades by that number, and so does the kit: the report, the feedback page
and ``autograder.check()`` read it here, so a check and its cell cannot disagree. The notebook
is whichever this install has --

* the source, ``solutions/<lab>/<lab>.ipynb``, in the instructor's kit;
* the learner's copy, ``labs/<lab>/<lab>.ipynb``, in a student bundle (``python -m autograder
  release``): nbgrader generates it with every test cell's metadata kept (hidden tests removed);
* the learner's copy a wheel carries, ``autograder/notebooks/<lab>.ipynb`` (``setup.py`` puts it
  there), where the kit is installed without its folders: a fresh Colab runtime's setup cell,
  a bundle installed with pip.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
KIT_ROOT = HERE.parents[1]           # the repository (or the bundle) this package sits in
PACKAGED = HERE.parent / "notebooks"  # the learner copies an installed wheel carries (setup.py)


def notebook(lab: str) -> Path:
    """The notebook whose test cells hold ``lab``'s points (see the module's list)."""
    candidates = (KIT_ROOT / "solutions" / lab / f"{lab}.ipynb", KIT_ROOT / "labs" / lab / f"{lab}.ipynb",
                  PACKAGED / f"{lab}.ipynb")
    for path in candidates:
        if path.is_file():
            return path
    raise LookupError(f"no notebook of {lab} to read its points from (looked for "
                      f"{', '.join(str(p) for p in candidates)})")


def graded_cells(path: Path) -> dict[str, float]:
    """``grade_id`` -> points of every autograded test cell of the notebook at ``path`` (nbgrader's
    rule: ``grade`` and not ``solution``)."""
    out = {}
    for cell in json.loads(Path(path).read_text())["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            out[str(meta["grade_id"])] = float(meta["points"])
    return out


@functools.cache
def of(lab: str) -> dict[str, float]:
    """``grade_id`` -> points of ``lab``'s test cells, read once per process."""
    return graded_cells(notebook(lab))
