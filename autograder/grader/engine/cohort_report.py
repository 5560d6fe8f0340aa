"""``python -m autograder report COURSE``: one HTML page about a graded cohort, for the instructor.

Read from what ``grade`` recorded for each submission (:mod:`autograder.grader.engine.resume`): the
grader's own verdicts, never the learners' notebooks. Per assignment: the score distribution,
the pass rate of every check, the time each grading took, failures by cause, flags and static
findings, late penalties. Figures are matplotlib PNGs embedded in the page, so it is one file
to mail or archive; ``grades.csv`` stays the machine format.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
import statistics
from collections import Counter
from pathlib import Path

from ...report import Outcome, Result
from . import resume

NAME = "cohort-report.html"


def recorded(course: Path) -> list[Outcome]:
    """Every submission's last recorded grading under ``COURSE/.autograder/graded/``."""
    out = []
    for path in sorted((Path(course) / resume.FOLDER).glob("*/*.json")):
        try:
            data = json.loads(path.read_text())["outcome"]
            data["results"] = [Result(**r) for r in data["results"]]
            out.append(Outcome(**{k: v for k, v in data.items() if k in Outcome.__dataclass_fields__}))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a record that does not parse is one ``grade`` grades again
    return out


def cause(o: Outcome) -> str:
    """A grading's failure as a cause to count: its error's first clause, numbers as ``N``
    ("nbgrader autograde failed: the kernel died", "grading stopped after N s (the submission
    hung)"), or ''."""
    return re.sub(r"\d+(?:\.\d+)?", "N", o.error.split(";")[0]).strip()[:100] if o.error else ""


def _figure(draw) -> str:
    """``draw(ax)`` on a fresh figure, returned as an embedded PNG ``<img>``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.2), dpi=100)
    try:
        draw(ax)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    return f'<img alt="figure" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _scores(ax, outcomes: list[Outcome]) -> None:
    top = max(o.max_score for o in outcomes) or 1
    ax.hist([o.score - o.late_penalty for o in outcomes], bins=min(20, int(top) + 1), range=(0, top),
            color="#4477aa", edgecolor="white")
    ax.set_xlabel("score (points, after late penalty)")
    ax.set_ylabel("submissions")
    ax.set_title("Score distribution")


def _pass_rates(ax, rates: dict[str, float]) -> None:
    names = list(rates)[::-1]
    ax.barh(names, [100 * rates[n] for n in names], color="#228833")
    ax.set_xlim(0, 100)
    ax.set_xlabel("submissions passing (%)")
    ax.set_title("Pass rate per check")
    ax.tick_params(axis="y", labelsize=8)


def _times(ax, outcomes: list[Outcome]) -> None:
    ordered = sorted(outcomes, key=lambda o: o.seconds)
    ax.bar(range(len(ordered)), [o.seconds for o in ordered], color="#ccbb44")
    ax.set_xlabel("submission (sorted by time)")
    ax.set_ylabel("grading time (s)")
    ax.set_title("Time per grading")


def section(assignment: str, outcomes: list[Outcome]) -> str:
    """The report's part for one assignment."""
    e = html.escape
    names = list(dict.fromkeys(r.name for o in outcomes for r in o.results))
    rates = {n: sum(1 for o in outcomes for r in o.results if r.name == n and r.passed) / len(outcomes)
             for n in names}
    scores = [o.score - o.late_penalty for o in outcomes]
    top = max((o.max_score for o in outcomes), default=0)
    causes = Counter(cause(o) for o in outcomes if o.error)
    late = [o for o in outcomes if o.late_penalty]
    flagged = [o for o in outcomes if o.flags or o.findings]
    parts = [f"<h2>{e(assignment)}</h2>",
             f"<p>{len(outcomes)} submission(s); median score {statistics.median(scores):g}/{top:g}, "
             f"mean {statistics.fmean(scores):.1f}; {sum(1 for o in outcomes if not o.error)} graded normally, "
             f"{sum(causes.values())} with an error; "
             f"median grading time {statistics.median(o.seconds for o in outcomes):.0f} s.</p>"]
    bare = [o.student for o in outcomes if not o.sandboxed]
    if bare:  # grade --unsandboxed: learner code ran as the grader's user
        parts.append(f"<p><b>Graded without the sandbox</b> (learner code ran as the grader's user): "
                     f"{e(', '.join(bare))}.</p>")
    if outcomes and top:
        parts.append(_figure(lambda ax: _scores(ax, outcomes)))
    if names:
        parts.append(_figure(lambda ax: _pass_rates(ax, rates)))
        parts.append("<table><tr><th>check</th><th>passing</th></tr>"
                     + "".join(f"<tr><td>{e(n)}</td><td>{100 * rates[n]:.0f} %</td></tr>" for n in names)
                     + "</table>")
    parts.append(_figure(lambda ax: _times(ax, outcomes)))
    parts.append("<h3>Failures by cause</h3>" + (
        "<table><tr><th>cause</th><th>submissions</th></tr>"
        + "".join(f"<tr><td>{e(c)}</td><td>{n}</td></tr>" for c, n in causes.most_common()) + "</table>"
        if causes else "<p>none</p>"))
    parts.append("<h3>Flags and static findings</h3>" + (
        "<table><tr><th>student</th><th>flags (kernel passes the grader did not confirm)</th>"
        "<th>static findings</th></tr>"
        + "".join(f"<tr><td>{e(o.student)}</td><td>{e(' '.join(o.flags))}</td><td>{len(o.findings)}</td></tr>"
                  for o in flagged) + "</table>" if flagged else "<p>none</p>"))
    parts.append("<h3>Late penalties</h3>" + (
        "<table><tr><th>student</th><th>hours late</th><th>penalty</th></tr>"
        + "".join(f"<tr><td>{e(o.student)}</td><td>{o.seconds_late / 3600:.1f}</td><td>{o.late_penalty:g}</td></tr>"
                  for o in late) + "</table>" if late else "<p>none</p>"))
    return "".join(parts)


def page(outcomes: list[Outcome]) -> str:
    """The whole report, as HTML."""
    by = {}
    for o in outcomes:
        by.setdefault(o.assignment, []).append(o)
    body = "".join(section(a, by[a]) for a in sorted(by)) or "<p>Nothing graded yet.</p>"
    return ("<!doctype html><html><head><meta charset=utf-8><title>Cohort report</title><style>"
            "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto}table{border-collapse:collapse}"
            "td,th{border-bottom:1px solid #ddd;padding:.3rem .6rem;text-align:left}</style></head><body>"
            f"<h1>Cohort report</h1><p>{len(outcomes)} graded submission(s), from the grader's own records.</p>"
            f"{body}</body></html>")


def write(course: Path, latest: list[Outcome] = (), out: Path | None = None) -> Path:
    """Write the report (default ``COURSE/cohort-report.html``) on every recorded grading, the
    ``latest`` ones of this run in place of their records (a grading the grader could not
    finish has none); written next to its place and renamed over it, never through a link."""
    path = Path(out) if out else Path(course) / NAME
    chosen = {(o.student, o.assignment): o for o in [*recorded(course), *latest]}
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    tmp.write_text(page(list(chosen.values())))
    tmp.replace(path)
    return path
