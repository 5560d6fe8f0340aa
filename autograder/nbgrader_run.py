"""Run real ``nbgrader autograde`` on one submission and read back what it decided.

Shared by ``check`` (a throw-away course around one learner notebook) and ``grade`` (an
instructor's course directory). Each submission is graded in its own ``nbgrader``
process with a wall-clock limit, so a submission that hangs or kills its kernel costs its
own grade and nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .report import Result

KIT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CELL_TIMEOUT_S = 240
DEFAULT_SUBMISSION_TIMEOUT_S = 1800


class SetupError(Exception):
    """The course directory or the assignment is not usable (a usage error, exit code 2)."""


@dataclass
class Outcome:
    """One submission's grading: per-check results, or why grading failed."""

    student: str
    assignment: str
    results: list[Result] = field(default_factory=list)
    error: str = ""

    @property
    def score(self) -> float:
        return sum(r.score for r in self.results)

    @property
    def max_score(self) -> float:
        return sum(r.max_score for r in self.results)


# Ray's C++ core writes warnings straight to file descriptor 2. By default ipykernel forwards
# fd-level output into the running cell as stderr, and nbgrader then scores that cell 0. The
# kernels nbgrader starts for grading read this IPython profile, which keeps such output in
# the kernel's own log instead (Python-level stderr is unaffected). nbgrader's Execute does
# not let extra kernel arguments be configured, hence a profile.
KERNEL_CONFIG = "c.IPKernelApp.capture_fd_output = False\n"


def _ipython_dir(cwd: Path) -> Path:
    """A private IPython directory for grading kernels, with :data:`KERNEL_CONFIG`."""
    profile = cwd / ".autograder-ipython" / "profile_default"
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "ipython_kernel_config.py").write_text(KERNEL_CONFIG)
    return profile.parent


def nbgrader(args: list[str], cwd: Path, timeout_s: float) -> subprocess.CompletedProcess:
    """Run ``python -m nbgrader ARGS`` in ``cwd``; a timeout is reported, never raised."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "IPYTHONDIR": str(_ipython_dir(cwd))}
    try:
        return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return subprocess.CompletedProcess(exc.cmd, 124, out, f"timed out after {timeout_s:g} s")


def _last_error_line(log: str) -> str:
    lines = [ln.strip() for ln in log.splitlines() if "ERROR" in ln or "Error" in ln]
    return lines[-1][:300] if lines else (log.strip().splitlines() or ["no output"])[-1][:300]


def ensure_assignment(course: Path, assignment: str, timeout_s: float = 300) -> None:
    """Make sure nbgrader's gradebook knows ``assignment`` (autograde needs its source cells)."""
    db = course / "gradebook.db"
    if db.exists():
        with sqlite3.connect(db) as con:
            try:
                if con.execute("select 1 from assignment where name=?", (assignment,)).fetchone():
                    return
            except sqlite3.Error:
                pass
    proc = nbgrader(["generate_assignment", assignment, "--force"], course, timeout_s)
    if proc.returncode != 0:
        raise SetupError(f"nbgrader generate_assignment {assignment} failed: {_last_error_line(proc.stderr)}")


def _messages(autograded: Path) -> dict[str, str]:
    """grade_id -> one-line reason, from the error outputs of the autograded notebooks.

    Every graded cell has an entry (empty when it passed), in notebook order.
    """
    out: dict[str, str] = {}
    for path in sorted(autograded.glob("*.ipynb")):
        nb = json.loads(path.read_text())
        for cell in nb.get("cells", []):
            gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if gid is None:
                continue
            out.setdefault(gid, "")
            for o in cell.get("outputs", []):
                if o.get("output_type") == "error":
                    value = (o.get("evalue") or "").strip().splitlines()
                    text = value[0] if value else ""
                    out[gid] = text if o.get("ename") == "AssertionError" and text else f"{o.get('ename')}: {text}"
                elif o.get("output_type") == "stream" and o.get("name") == "stderr" and not out[gid]:
                    out[gid] = "the cell wrote to stderr: " + "".join(o.get("text", ""))[:120].strip()
    return out


def read_results(course: Path, assignment: str, student: str) -> list[Result]:
    """The gradebook's per-cell scores for one submission, with failure messages."""
    from nbgrader.api import Gradebook, MissingEntry

    messages = _messages(course / "autograded" / student / assignment)
    results = []
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            return []
        order = {gid: i for i, gid in enumerate(messages)}
        for notebook in submission.notebooks:
            for g in sorted(notebook.grades, key=lambda g: order.get(g.name, len(order))):
                if g.auto_score is None and g.manual_score is None and g.cell_type != "code":
                    continue
                name = g.name[5:] if g.name.startswith("test-") else g.name
                score = float(g.score or 0.0)
                msg = "" if score >= g.max_score else messages.get(g.name, "")
                results.append(Result(name, score, float(g.max_score), msg))
    return results


def autograde(course: Path, assignment: str, student: str, *,
              cell_timeout_s: float = DEFAULT_CELL_TIMEOUT_S,
              timeout_s: float = DEFAULT_SUBMISSION_TIMEOUT_S) -> Outcome:
    """Grade one submission with real ``nbgrader autograde`` and return its outcome."""
    proc = nbgrader(["autograde", assignment, "--student", student, "--force",
                     f"--Execute.timeout={int(cell_timeout_s)}"], course, timeout_s)
    results = read_results(course, assignment, student) if proc.returncode != 124 else []
    outcome = Outcome(student, assignment, results)
    log = (proc.stderr or "") + (proc.stdout or "")
    if proc.returncode == 124:
        outcome.error = f"grading stopped after {timeout_s:g} s (the submission hung)"
    elif proc.returncode != 0 or not results:
        reason = "the kernel died" if "DeadKernel" in log or "kernel died" in log.lower() else _last_error_line(log)
        outcome.error = f"nbgrader autograde failed: {reason}"
    return outcome


def snapshot(db: Path) -> Path | None:
    """Copy the gradebook aside before a submission runs (a submission runs arbitrary code)."""
    if not db.exists():
        return None
    backup = db.with_name(db.name + ".bak")
    shutil.copy2(db, backup)
    return backup


def scores_except(db: Path, student: str) -> list[tuple] | None:
    """Every other student's grade rows, to prove a submission did not touch them."""
    try:
        with sqlite3.connect(db) as con:
            if con.execute("pragma integrity_check").fetchone()[0] != "ok":
                return None
            return con.execute(
                "select sa.student_id, g.cell_id, g.auto_score, g.manual_score from grade g "
                "join submitted_notebook sn on g.notebook_id = sn.id "
                "join submitted_assignment sa on sn.assignment_id = sa.id "
                "where sa.student_id != ? order by 1, 2", (student,)).fetchall()
    except sqlite3.Error:
        return None
