"""nbgrader's exchange, as the grading service (:mod:`autograder.grader.service.serve`) uses it.

nbgrader's default exchange is a folder shared by the instructor and the students
(``Exchange.root``, ``/usr/local/share/nbgrader/exchange`` unless set). For a course
``course_id`` it holds:

* ``{root}/{course_id}/outbound/{assignment}/``: what ``release_assignment`` released and
  ``fetch_assignment`` fetches;
* ``{root}/{course_id}/inbound/{student}+{assignment}+{timestamp}+{random}/``: one folder per
  ``submit`` (the notebooks, then ``timestamp.txt``, then ``submission_secret.txt``, written in
  that order: a folder without the secret is still arriving);
* ``{root}/{course_id}/feedback/{hash}.html``: what ``release_feedback`` released, one page per
  notebook, named by a hash of the submission's secret and the notebook's name;
  ``fetch_feedback`` brings to the student the page of every notebook of their own cached
  submissions, and nothing else.

This module reads that layout and takes one submission at a time into the course, as
``nbgrader collect`` would (its own copy, so its ignore and size settings hold), and hands a
graded submission's feedback back through ``generate_feedback`` and ``release_feedback``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from . import course_config, nbgrader_run

SECRET = "submission_secret.txt"  # written last by nbgrader's submit
TIMESTAMP = "timestamp.txt"
DEFAULT_ROOT = "/usr/local/share/nbgrader/exchange"


@dataclass(frozen=True)
class Place:
    """Where a course's submissions arrive: the exchange root and the course id."""

    root: Path
    course_id: str

    @property
    def inbound(self) -> Path:
        return self.root / self.course_id / "inbound"


@dataclass(frozen=True)
class Inbound:
    """One submission in the exchange's inbound folder, named as nbgrader's submit names it."""

    name: str  # {student}+{assignment}+{timestamp}+{random}: unique, the service's key
    student: str
    assignment: str
    timestamp: str  # as nbgrader wrote it (its own clock, the configured timezone)

    @property
    def when(self) -> float:
        """The timestamp as seconds since the epoch (nbgrader's own parser), 0 if unreadable."""
        from nbgrader.utils import parse_utc

        try:
            return parse_utc(self.timestamp).timestamp()
        except (ValueError, OverflowError, TypeError):
            return 0.0


def place(course: Path) -> Place:
    """The exchange root and course id the course's nbgrader configuration names."""
    from ..errors import SetupError

    config = course_config.settings(course)
    course_id = str(config.CourseDirectory.get("course_id", "") or "").strip()
    if not course_id:
        raise SetupError(f"{course}: no course id (set c.CourseDirectory.course_id in nbgrader_config.py, "
                         "as release_assignment needs too)")
    return Place(Path(str(config.Exchange.get("root", DEFAULT_ROOT))), course_id)


def parse(name: str) -> Inbound | None:
    """An inbound folder's name as nbgrader's collect splits it (from the right: a student id
    may hold ``+``); ``None`` for a name that is not a submission's."""
    parts = name.rsplit("+", 3)
    if len(parts) == 4:
        student, assignment, timestamp, _ = parts
    elif len(parts) == 3:  # Exchange.add_random_string = False
        student, assignment, timestamp = parts
    else:
        return None
    if not student or not assignment or not timestamp or name.startswith("."):
        return None
    return Inbound(name, student, assignment, timestamp)


def scan(where: Place) -> tuple[list[Inbound], list[Inbound]]:
    """The submissions in the inbound folder: those complete (nbgrader's submit wrote its
    secret, its last file) and those still arriving, each oldest first."""
    if not where.inbound.is_dir():
        return [], []
    complete, arriving = [], []
    for path in where.inbound.iterdir():
        item = parse(path.name)
        if item is None or not path.is_dir() or path.is_symlink():
            continue
        (complete if (path / SECRET).is_file() else arriving).append(item)
    return sorted(complete, key=lambda i: (i.when, i.name)), sorted(arriving, key=lambda i: (i.when, i.name))


def folder(where: Place, item: Inbound) -> Path:
    """The inbound folder of one submission."""
    return where.inbound / item.name


def collect(course: Path, where: Place, item: Inbound) -> Path:
    """Copy exactly this submission into ``submitted/<student>/<assignment>/``, replacing what
    was collected before, with nbgrader's collect's own filter (its ``CourseDirectory.ignore``,
    ``include`` and ``max_file_size`` hold; intake has refused a submission over the service's
    size limit). Unlike nbgrader's copy, a link is copied as a link, never followed: the inbound
    folder is writable by others (nbgrader makes it 0777), and a link to another student's work
    or the grader's files must not become a file of this submission. ``nbgrader collect`` itself
    takes each student's *latest* submission, which may be newer than the one the service
    claimed: this takes the one claimed, so the grade recorded is that submission's."""
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.utils import ignore_patterns

    config = course_config.settings(course)
    coursedir = CourseDirectory(config=config, root=str(course))
    dest = Path(coursedir.format_path(coursedir.submitted_directory, item.student, item.assignment))
    if dest.is_symlink() or dest.is_file():
        dest.unlink()
    elif dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(folder(where, item), dest, symlinks=True,  # a link stays a link: the scratch course drops it
                    ignore=ignore_patterns(exclude=coursedir.ignore, include=coursedir.include,
                                           max_file_size=coursedir.max_file_size, log=coursedir.log))
    return dest


def release_feedback(course: Path, student: str, assignment: str, section: str, timeout_s: float = 300) -> list[Path]:
    """Generate and release one student's feedback for one assignment, so that their
    ``fetch_feedback`` brings it: nbgrader's page of each notebook, with the grader's own
    verdicts (``section``, HTML) put at its top. nbgrader's ``fetch_feedback`` fetches only
    pages named after the submission's notebooks, so a page of its own (the kit's
    ``grader-feedback.html``) would be released but never fetched. The released pages' paths
    in the course's ``feedback/`` folder."""
    from ..errors import SetupError
    from .nbgrader_run import cause

    proc = nbgrader_run.nbgrader(["generate_feedback", assignment, "--student", student, "--force"], course, timeout_s)
    if proc.returncode != 0:
        raise SetupError(f"nbgrader generate_feedback failed: {cause(proc.stderr + proc.stdout)}")
    out = course / "feedback" / student / assignment
    pages = sorted(p for p in out.glob("*.html") if p.name != "grader-feedback.html" and not p.is_symlink())
    for page in pages:
        page.write_text(with_section(page.read_text(errors="replace"), section))
    submitted = course / "submitted" / student / assignment
    for name in (TIMESTAMP, SECRET):  # release_feedback hashes the secret; the scratch course never held it
        if (submitted / name).is_file() and not (submitted / name).is_symlink():
            shutil.copyfile(submitted / name, out / name)
    proc = nbgrader_run.nbgrader(["release_feedback", assignment, "--student", student], course, timeout_s)
    if proc.returncode != 0:
        raise SetupError(f"nbgrader release_feedback failed: {cause(proc.stderr + proc.stdout)}")
    return pages


MARK = "<!-- autograder: the grader's verdicts -->"


def with_section(page: str, section: str) -> str:
    """nbgrader's feedback page with ``section`` right after its ``<body>`` tag (once: a page
    that has it already gets it replaced)."""
    if MARK in page:
        before, rest = page.split(MARK, 1)
        page = before + rest.split(MARK, 1)[-1]
    at = page.find("<body")
    at = page.find(">", at) + 1 if at >= 0 else 0
    return page[:at] + MARK + section + MARK + page[at:]
