"""Hostile submissions (``tests/attacks_labNN.py``), each lab's graded as one cohort through
the real grader and real nbgrader: none may score a point its honest part did not earn --
neither in grades.csv nor in nbgrader's gradebook."""

from __future__ import annotations

import csv
import os
import signal
import time
from pathlib import Path

import pytest

import attacks_lab00
import attacks_lab01
import attacks_lab02
import attacks_lab03
import attacks_lab04
import attacks_lab05
from autograder.grader.session import catalog
from autograder.grader.engine import cohort
from notebooks import extended, make_course, only_extended, sandboxed, submit, variant

pytestmark = [pytest.mark.timeout(1800), pytest.mark.grading]  # one cohort of ~14 submissions on 2 cores

CORPORA = {m.LAB: m for m in (attacks_lab00, attacks_lab01, attacks_lab02, attacks_lab03, attacks_lab04,
                              attacks_lab05)}


def _stop_daemons(course: Path) -> None:
    """End the processes the daemon attack left behind (each wrote its pid; checked by marker)."""
    for pidfile in course.glob(".*.pid"):
        try:
            pid = int(pidfile.read_text())
            if b"ATTACK-DAEMON" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGTERM)
        except (ValueError, OSError):
            pass


def _gradebook_scores(course: Path, lab: str, students) -> dict[str, float]:
    """Each student's total for the lab as nbgrader's gradebook has it (what `nbgrader export` reports)."""
    from nbgrader.api import Gradebook, MissingEntry

    out = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in students:
            try:
                out[student] = float(gb.find_submission(lab, student).score)
            except MissingEntry:
                out[student] = 0.0
    return out


def _grade(lab: str, tmp: Path, mp: pytest.MonkeyPatch) -> tuple:
    """One lab's corpus graded as one cohort: (grades.csv rows, gradebook totals, course)."""
    corpus = CORPORA[lab]
    course = make_course(tmp / "course", [lab])
    for name, spec in corpus.ATTACKS.items():
        if spec.get("extended") and not extended():
            continue
        kwargs = {k: v for k, v in spec.items()
                  if k not in ("honest", "may_lose", "why", "open_issue", "static_flag", "extended")}
        submit(course, name, lab, variant(lab, tmp / f"{name}.ipynb", **kwargs))
    mp.setenv("AUTOGRADER_SEED", str(corpus.SEED))  # an instructor's fixed seed (README), as attacks assume
    mp.setenv("AUTOGRADER_CALL_TIMEOUT_S", "20")
    started = time.perf_counter()
    cohort.run(course, lab, cell_timeout_s=45, timeout_s=600,
               sandboxed=sandboxed())
    print(f"\n{lab}: cohort of {len(corpus.ATTACKS)} graded in {time.perf_counter() - started:.0f} s")
    time.sleep(3)  # the instructor opens the results a moment later, not within the same millisecond
    with open(course / "grades.csv") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    return rows, _gradebook_scores(course, lab, corpus.ATTACKS), course


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """``graded(lab)``: that lab's corpus, graded once (on first use) for the whole module."""
    done, mp = {}, pytest.MonkeyPatch()

    def get(lab: str) -> tuple:
        if lab not in done:
            with mp.context() as m:
                done[lab] = _grade(lab, tmp_path_factory.mktemp(f"attacks{lab[:2]}"), m)
        return done[lab]

    try:
        yield get
    finally:
        for _, _, course in done.values():
            _stop_daemons(course)


def _cases():
    for lab, corpus in sorted(CORPORA.items()):
        for name, spec in corpus.ATTACKS.items():
            marks = [pytest.mark.xfail(strict=True, reason=spec["open_issue"])] if "open_issue" in spec else []
            if spec.get("extended"):
                marks.append(pytest.mark.skipif(not extended(), reason="the extended set: COURSE_KIT_EXTENDED=1"))
            yield pytest.param(lab, name, marks=marks, id=name)


def test_every_attacks_honest_and_may_lose_sets_are_disjoint_checks_of_its_lab():
    """A check an attack may lose is not also one its honest part surely earns (the score the test
    expects would count it twice), and every name is one of the lab's checks."""
    for lab, corpus in CORPORA.items():
        names = set(catalog.for_lab(lab))
        for name, spec in corpus.ATTACKS.items():
            honest, may_lose = spec["honest"], spec.get("may_lose", set())
            assert not honest & may_lose, f"{name}: {sorted(honest & may_lose)} both honest and may_lose"
            assert honest | may_lose <= names, f"{name}: unknown checks {sorted((honest | may_lose) - names)}"


@pytest.mark.slow
@pytest.mark.parametrize(("lab", "name"), list(_cases()))
def test_attack_earns_no_unearned_point(graded, lab, name):
    rows, gradebook, _ = graded(lab)
    ATTACKS = CORPORA[lab].ATTACKS
    POINTS = {n: c.points for n, c in catalog.for_lab(lab).items()}
    honest, may_lose = ATTACKS[name]["honest"], ATTACKS[name].get("may_lose", set())
    assert honest | may_lose <= set(POINTS), f"unknown checks in {name}'s honest set"
    earned = sum(POINTS[c] for c in honest)
    row = rows.get(name)
    assert row is not None, f"{name} has no row in grades.csv"
    failed = set(row["failed_checks"].split())
    report = (f"{name} ({ATTACKS[name]['why']}): grades.csv score {row['score']}/{row['max_score']}, "
              f"status {row['status']!r}, failed {sorted(failed)}, "
              f"gradebook {gradebook[name]:g}; honest work earns {earned:g} ({sorted(honest)})"
              + (f", and may earn {sorted(may_lose)} as measured" if may_lose else ""))
    # what it may earn as measured (e.g. a misplaced job's throughput) counts when it passed
    earned += sum(POINTS[c] for c in may_lose - failed)
    assert failed >= set(POINTS) - honest - may_lose, report
    assert float(row["score"]) == earned and float(row["max_score"]) == sum(POINTS.values()), report
    assert gradebook[name] == earned, report
    # and the instructor is told: every attack the static check can see is flagged before it
    # runs; what is not an attack (a submission that "cleans up" with ray.shutdown()) is not
    flagged = int(row["static_findings"])
    if ATTACKS[name]["why"].startswith("not an attack"):
        assert flagged == 0, f"{name}: {flagged} static findings for honest code"
    elif ATTACKS[name].get("static_flag", True):
        assert flagged > 0, f"{name}: not flagged by the static check"


@pytest.mark.slow
@only_extended("lab 00's hanging cell, tests/test_grading_lab00.py; l01-hanging-actor is in the extended set")
def test_a_hanging_actor_costs_one_deadline_not_one_cell_limit_per_cell(graded):
    rows, _, _ = graded("01_actor_scaling")
    # two cells call the hanging method: at the cell limit (45 s here) each, they alone would
    # take 90 s; with the deadline in the actor the first stops after 20 s, the second at once
    # (the rest of this submission is the blank lab, ≈ 30 s)
    assert int(rows["l01-hanging-actor"]["seconds"]) < 90, rows["l01-hanging-actor"]
