"""A throw-away copy of an nbgrader course for one submission, and its grade merged back.

Each submission is autograded in a scratch course of its own: the course's
``nbgrader_config.py``, a gradebook that knows every assignment but no student
(:func:`template`), and that one submission. Whatever the submission's kernel does to *that*
gradebook -- rewrite hidden tests, add graded cells, set its own scores -- ends with it. The
cohort grader then writes the grader's own verdicts for that student and lab into the real
gradebook (:func:`record`) and copies the autograded notebook back (:func:`bring_back`).

A kernel runs as the same user as the grader, so it can find the course anyway. What it must
not change -- the real gradebook, every student's submitted and autograded work, the course's
config and the kit's own code -- is held in the grader's memory while it runs
(:class:`Untouchable`) and put back afterwards, and the submission that changed it scores 0.
The template gradebook is kept in memory too, so no later submission is graded against a
template an earlier one rewrote.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ...report import Result
from . import course_config

GRADEBOOK = "gradebook.db"


def template(course: Path) -> bytes:
    """The course's gradebook with every student (and so every submission) removed, as bytes.

    Built in a private temporary folder and read back: each scratch course gets these bytes,
    not a file that a submission's kernel could rewrite for the next one.
    """
    import tempfile

    from nbgrader.api import Gradebook

    with tempfile.TemporaryDirectory(prefix="autograder-template-") as tmp:
        dest = Path(tmp) / GRADEBOOK
        shutil.copy2(course / GRADEBOOK, dest)
        with Gradebook(f"sqlite:///{dest}") as gb:
            for student in [s.id for s in gb.students]:
                gb.remove_student(student)
        return dest.read_bytes()


SUBMITTED = ("*.ipynb", "timestamp.txt")  # what a scratch course takes of a submission
# nbgrader's submit writes it next to the notebook; not the learner's work, never shown to its kernel,
# and not reported as left out (release_feedback reads it from the course: autograder.grader.nbgrading.exchange)
SECRET = "submission_secret.txt"


def make(course: Path, student: str, assignment: str, gradebook: bytes, root: Path) -> tuple[Path, list[str]]:
    """A scratch course under ``root`` holding one submission: its path, and the submitted files
    left out (anything but the notebook and nbgrader's ``timestamp.txt``: a ``course/`` or
    ``ipykernel_launcher.py`` next to the notebook would otherwise shadow the kit in its kernel)."""
    scratch = root / "course"
    src = course / "submitted" / student / assignment
    dst = scratch / "submitted" / student / assignment
    dst.mkdir(parents=True)
    shutil.copy2(course / "nbgrader_config.py", scratch)
    (scratch / GRADEBOOK).write_bytes(gradebook)
    taken = {p for pattern in SUBMITTED for p in src.glob(pattern) if _regular(p)}
    for p in taken:
        shutil.copyfile(p, dst / p.name)
    left = sorted(str(p.relative_to(src)) for p in src.rglob("*")
                  if p not in taken and not p.is_dir() and p != src / SECRET)
    return scratch, left


MAX_BRING_BACK = 64 * 2**20  # bytes: what one autograded folder may bring back into the course


def _regular(path: Path) -> bool:
    """A regular file, not a link, pipe or device (which a copy would follow or block on)."""
    import stat

    return stat.S_ISREG(path.lstat().st_mode)


def bring_back(scratch: Path, course: Path, student: str, assignment: str) -> list[str]:
    """The autograded notebook (and the regular files nbgrader wrote next to it) into the real
    course; what was left behind: links, pipes and devices, and anything past
    :data:`MAX_BRING_BACK` (a sparse file costs nothing in the scratch folder and its full size
    in a copy)."""
    src = scratch / "autograded" / student / assignment
    dst = course / "autograded" / student / assignment
    if dst.exists() or dst.is_symlink():
        shutil.rmtree(dst) if dst.is_dir() and not dst.is_symlink() else dst.unlink()
    left, budget = [], MAX_BRING_BACK
    if not src.is_dir() or src.is_symlink():
        return left
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_dir() and not path.is_symlink():
            continue
        if not _regular(path) or path.lstat().st_size > budget:
            left.append(str(rel))
            continue
        budget -= path.lstat().st_size
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dst / rel, follow_symlinks=False)
    return left


@dataclass
class Late:
    """How late a submission was (nbgrader's ``timestamp.txt`` against the assignment's due
    date in the real gradebook) and the penalty nbgrader's late-submission plugin gives it."""

    seconds: float = 0.0
    penalty: float = 0.0


def record(course: Path, assignment: str, student: str, results: list[Result]) -> Late:
    """The grader's per-check scores for one submission, in the real gradebook (created if new).

    Only this student's rows for this assignment are written: the grade of each test cell
    ``test-<check>``, as an automatic score, with no manual score or extra credit; the
    submission's timestamp and each notebook's late penalty, as nbgrader's autograde would set
    them -- from the course's own files, not the scratch course's, which the kernel could rewrite.
    """
    from nbgrader.api import Gradebook, MissingEntry

    config = course_config.settings(course)
    stamp = _submitted_at(course, assignment, student, config)
    with Gradebook(f"sqlite:///{course / GRADEBOOK}") as gb:
        gb.update_or_create_student(student)
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            submission = gb.add_submission(assignment, student)
        if stamp is not None:  # as nbgrader: no timestamp.txt keeps what the gradebook has
            submission.timestamp = stamp
        for r in results:
            try:
                grade = gb.find_grade(f"test-{r.name}", assignment, assignment, student)
            except MissingEntry:
                continue
            grade.auto_score, grade.manual_score, grade.extra_credit = r.score, None, None
        gb.db.commit()
        late = Late(submission.total_seconds_late)
        for notebook in submission.notebooks:
            notebook.late_submission_penalty = _penalty(config, student, notebook, late.seconds)
            late.penalty += notebook.late_submission_penalty or 0.0
        gb.db.commit()
    return late


def _submitted_at(course: Path, assignment: str, student: str, config):
    """nbgrader's ``timestamp.txt`` of the submission (None without one), as nbgrader parses it."""
    from nbgrader.coursedir import CourseDirectory

    coursedir = CourseDirectory(config=config, root=str(course))
    return coursedir.get_existing_timestamp(coursedir.format_path(coursedir.submitted_directory, student,
                                                                  assignment))


def _penalty(config, student: str, notebook, seconds_late: float) -> float | None:
    """nbgrader's late penalty for one notebook: the course's plugin (``AssignLatePenalties.
    plugin_class``, nbgrader's ``LateSubmissionPlugin`` unless set), clamped as nbgrader clamps it."""
    if seconds_late <= 0:
        return None
    from nbgrader.preprocessors import AssignLatePenalties

    assign = AssignLatePenalties(config=config)
    assign.init_plugin()
    penalty = assign.plugin_inst.late_submission_penalty(student, notebook.score, seconds_late)
    return None if penalty is None else assign._check_late_penalty(notebook, penalty)


class Untouchable:
    """The files of a course and kit that no submission may change, held in memory while one runs.

    :meth:`restore` puts back every file that changed, appeared or vanished since the snapshot
    and names them. A copy on disk would not do: the kernel, running as the same user, could
    rewrite the copy too. Changes made and undone while the submission runs are not seen.
    """

    def __init__(self, course: Path | None, kit: Path):
        """``course=None``: the kit only (a grading slot, where the course is not on this machine)."""
        self.roots = {"course": course, "kit": kit}
        self.files = self._read()

    def _paths(self):
        """Every file held: the course folder's own entries (the gradebook, its journals, the
        config, and any module or package planted next to them, which ``python -m`` run from
        there would import), every submitted and autograded file, every file of the kit's packages
        (compiled ``__pycache__`` files included: Python runs a ``.pyc`` whose header matches
        its source), and the ``.pth`` and ``*customize.py`` files of site-packages, which
        every Python process runs at start."""
        course, kit = self.roots["course"], self.roots["kit"]
        for p in sorted(course.iterdir()) if course else ():  # a folder that appears here is a planted package
            yield "course", p
        for folder in ("submitted", "autograded", ".autograder") if course else ():  # .autograder: resume's
            for p in sorted((course / folder).rglob("*")) if (course / folder).is_dir() else ():
                if not p.is_dir() or p.is_symlink():
                    yield "course", p
        for p in sorted(kit.iterdir()):  # the kit's folder, first on sys.path when a grader runs there
            if not p.is_dir() or p.is_symlink() or not p.name.isidentifier() or (p / "__init__.py").exists():
                yield "kit", p
        for package in ("autograder", "course"):
            for p in sorted((kit / package).rglob("*")):
                if not p.is_dir() or p.is_symlink():
                    yield "kit", p
        for folder in _site_folders():
            for p in sorted(folder.glob("*.pth")) + [folder / "sitecustomize.py", folder / "usercustomize.py"]:
                yield "site", p

    def _read(self) -> dict[tuple[str, Path], bytes | None]:
        out = {}
        for root, p in self._paths():
            try:
                out[(root, p)] = p.read_bytes() if _regular(p) else None
            except FileNotFoundError:
                continue
        return out

    def restore(self) -> list[str]:
        """Put every changed file back; the changed ones, relative to their course or kit."""
        now = self._read()
        changed = sorted({key for key in set(now) | set(self.files) if now.get(key, b"-") != self.files.get(key, b"-")},
                         key=lambda k: str(k[1]))
        for root, p in changed:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)  # a folder where a held file was (or a planted one)
            elif p.is_symlink() or (p.exists() and not _regular(p)):
                p.unlink()
            if (root, p) in self.files and self.files[(root, p)] is not None:
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(self.files[(root, p)])
            elif p.exists():
                p.unlink()
        return [f"{root}/{p.relative_to(self.roots[root])}" if root in self.roots else str(p) for root, p in changed]


def _site_folders() -> list[Path]:
    """site-packages and the user site of this interpreter (where ``.pth`` files are read)."""
    import site

    folders = [*site.getsitepackages(), site.getusersitepackages()]
    return [Path(f) for f in dict.fromkeys(folders) if Path(f).is_dir()]
