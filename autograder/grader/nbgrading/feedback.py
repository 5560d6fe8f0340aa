"""Each learner's feedback page: what the grader measured in their submission, check by check.

Written by ``grade`` for every graded submission, from the grader's own verdicts (an
:class:`~autograder.report.Outcome`), never from what the learner's kernel printed: the
graded notebook's outputs come from learner-controlled code and may say anything. The page
is ``COURSE/feedback/<student>/<assignment>/grader-feedback.html``, next to the page
``nbgrader generate_feedback`` writes for the notebook itself, so that
``nbgrader release_feedback`` hands both out.
"""

from __future__ import annotations

import html
from pathlib import Path

from ...report import Outcome, mark

NAME = "grader-feedback.html"
STYLE = ("body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;line-height:1.45}"
         "table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:.4rem;"
         "text-align:left;vertical-align:top}.PASS{color:#17692d}.PART{color:#8a5a00}.FAIL{color:#a3161b}"
         ".SKIP{color:#555}small{color:#555}")


def body(o: Outcome, what: dict[str, str]) -> str:
    """The verdicts of one submission as an HTML fragment: the score, notes, one row per check."""
    e = html.escape
    rows = "".join(
        f"<tr><td class={mark(r)}>{mark(r)}</td><td><b>{e(r.name)}</b><br><small>{e(what.get(r.name, ''))}</small></td>"
        f"<td>{r.score:g}/{r.max_score:g}</td><td>{e(r.message) if r.message else 'measured and passed'}</td></tr>"
        for r in o.results)
    notes = []
    if o.error:
        notes.append(f"The grading did not finish normally: {e(o.error)}")
    if o.late_penalty:
        notes.append(f"Submitted {o.seconds_late / 3600:.1f} h late: {o.late_penalty:g} point(s) deducted.")
    if o.cell_errors:
        notes.append("Cells that raised an error while the notebook ran (often why a check failed): "
                     + "; ".join(e(c) for c in o.cell_errors[:5]))
    score = o.score - o.late_penalty
    return (f"<h1>{e(o.assignment)}</h1><p>Feedback for <b>{e(o.student)}</b>: "
            f"<b>{score:g}/{o.max_score:g}</b> points.</p>"
            + "".join(f"<p>{n}</p>" for n in notes)
            + "<p>The grader ran your code itself, on its own inputs, and timed it against the reference "
            "with its own clock; each line says what it measured and what it expected.</p>"
            f"<table><tr><th></th><th>check</th><th>points</th><th>what the grader found</th></tr>{rows}</table>")


def page(o: Outcome, what: dict[str, str]) -> str:
    """The feedback page of one submission, as HTML."""
    e = html.escape
    return (f"<!doctype html><html><head><meta charset=utf-8><title>{e(o.assignment)}: feedback for "
            f"{e(o.student)}</title><style>{STYLE}</style></head><body>{body(o, what)}</body></html>")


SECTION_ID = "autograder-feedback"


def section(o: Outcome, what: dict[str, str]) -> str:
    """The verdicts as a section to put inside another page (nbgrader's feedback page, which
    is what a student's ``fetch_feedback`` brings): the page's style, scoped to the section."""
    rules = [rule.split("{", 1) for rule in STYLE.split("}") if rule and not rule.startswith("body")]
    scoped = "".join(",".join(f"#{SECTION_ID} {sel}" for sel in sels.split(",")) + "{" + decls + "}"
                     for sels, decls in rules)
    return (f"<section id={SECTION_ID} style=\"font-family:system-ui,sans-serif;max-width:52rem;margin:1rem auto;"
            f"padding:1rem;border:2px solid #333\"><style>{scoped}</style>{body(o, what)}</section>")


def write(course: Path, o: Outcome, what: dict[str, str]) -> Path | None:
    """Write one submission's page under ``COURSE/feedback/`` (replacing, never writing through,
    whatever stands there), ``what`` saying what each check measures
    (:func:`autograder.grader.session.catalog.descriptions`); ``None`` for a grading that produced no verdicts."""
    if not o.results:
        return None
    folder = Path(course) / "feedback" / o.student / o.assignment
    if any(p.is_symlink() for p in (folder.parent.parent, folder.parent, folder)):
        return None  # the feedback folder is the grader's own; a link there was not made by it
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / NAME
    tmp = folder / f".{NAME}.tmp"
    tmp.unlink(missing_ok=True)
    tmp.write_text(page(o, what))
    tmp.replace(path)
    return path
