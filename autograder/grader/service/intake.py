"""What the grading service refuses before it grades anything, with the message the student sees.

A submission that arrives through the exchange is read here, as files, by the grader's
process; nothing of it runs. It is refused -- not graded, not counted against the student's
rate limit -- when its student is not on the course's roster, its lab is not the course's, it
holds a link or a special file (a link to another student's work or to the grader's files
would be read as this submission's), it is larger than the service's limit (checked before any file is read), it holds no notebook
of the lab's name, that notebook does not parse, or it holds none of the lab's own cells
(another lab's notebook under this lab's name). Each message says what was found and what
to do.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MAX_MB = 50.0


@dataclass(frozen=True)
class Course:
    """What intake checks a submission against: the roster, the labs and each lab's cells."""

    students: frozenset[str]
    labs: frozenset[str]
    cells: dict[str, frozenset[str]]  # lab -> the grade_ids of its released notebook's nbgrader cells


def roster(course: Path) -> Course:
    """The course as its gradebook and released notebooks say: students (``nbgrader db
    student add``, or the formgrader), labs (``generate_assignment``) and their cells."""
    db = course / "gradebook.db"
    students, labs = set(), set()
    if db.is_file():
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            students = {r[0] for r in con.execute("select id from student")}
            labs = {r[0] for r in con.execute("select name from assignment")}
    cells = {lab: frozenset(_grade_ids(course / "labs" / lab / f"{lab}.ipynb")) for lab in labs}
    for other in (course / "labs").glob("*/*.ipynb") if (course / "labs").is_dir() else ():
        cells.setdefault(other.parent.name, frozenset(_grade_ids(other)))
    for lab, ids in kit_cells().items():  # labs not released yet: their notebook is still not this lab's
        cells.setdefault(lab, ids)
    return Course(frozenset(students), frozenset(labs), cells)


@functools.cache
def kit_cells() -> dict[str, frozenset[str]]:
    """The grade_ids of every lab the kit ships, from its own notebooks: a course that released
    only lab 00 still tells lab 01's notebook from lab 00's (they share only the locked cells)."""
    from ...checks import points
    from ...labs import all_labs as labs

    out = {}
    for lab in labs():
        try:
            out[lab] = frozenset(_grade_ids(points.notebook(lab)))
        except LookupError:
            continue
    return out


def _grade_ids(path: Path) -> set[str]:
    """The grade_ids of a notebook's nbgrader cells; empty for a file that is not a notebook."""
    try:
        nb = json.loads(path.read_bytes())
        return {c["metadata"]["nbgrader"]["grade_id"] for c in nb["cells"]
                if isinstance(c, dict) and "grade_id" in c.get("metadata", {}).get("nbgrader", {})}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return set()


def size(folder: Path) -> int:
    """Bytes of the regular files under ``folder`` (links not followed, as nbgrader counts)."""
    total = 0
    for p in folder.rglob("*"):
        if p.is_file() and not p.is_symlink():
            total += p.lstat().st_size
    return total


def problem(folder: Path, student: str, lab: str, course: Course, max_bytes: float) -> str | None:
    """Why this submission is not graded, in words for its student; ``None`` when it may be."""
    if student not in course.students:
        return (f"you ({student}) are not on this course's roster, so your submission was not graded; "
                "ask your instructor to add you, then submit again")
    if lab not in course.labs:
        return f"this course has no lab {lab!r}, so your submission was not graded"
    odd = [p for p in folder.rglob("*") if p.is_symlink() or not (p.is_dir() or p.is_file())]
    if odd:
        return (f"your submission holds a link or special file ({odd[0].relative_to(folder)}), so it was not "
                "graded; submit the notebook itself")
    got = size(folder)
    if got > max_bytes:
        return (f"your submission is {got / 2**20:.0f} MB, over this course's limit of {max_bytes / 2**20:.0f} MB, "
                "so it was not graded; clear the notebook's outputs (Edit, Clear Outputs of All Cells), "
                "save, and submit again")
    notebook = folder / f"{lab}.ipynb"
    if not notebook.is_file() or notebook.is_symlink():
        found = sorted(p.name for p in folder.iterdir() if p.name not in ("timestamp.txt", "submission_secret.txt"))
        return (f"your submission has no {lab}.ipynb (it holds: {', '.join(found) or 'nothing'}), so it was not "
                f"graded; submit the notebook you fetched for {lab}, under its own name")
    try:
        nb = json.loads(notebook.read_bytes())
        if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
            raise ValueError("no list of cells")
    except (ValueError, UnicodeDecodeError) as exc:
        return (f"your {lab}.ipynb is not a readable notebook ({type(exc).__name__}: {str(exc)[:120]}), so it "
                "was not graded; open it in JupyterLab, save it, and submit again")
    ids = _grade_ids(notebook)
    if not ids & own_cells(course, lab):
        like = [other for other in sorted(course.cells) if other != lab and ids & own_cells(course, other)]
        return (f"your {lab}.ipynb holds none of lab {lab}'s cells"
                + (f" (it looks like lab {like[0]}'s notebook)" if like else "")
                + f", so it was not graded; submit lab {lab}'s own notebook")
    return None


def own_cells(course: Course, lab: str) -> frozenset[str]:
    """The cells only ``lab`` has: every lab shares a few locked ones (``install``, ``setup``)."""
    mine = course.cells.get(lab, frozenset())
    shared = frozenset().union(*(cells for other, cells in course.cells.items() if other != lab))
    return (mine - shared) or mine
