"""The course on a real JupyterHub, graded on submit, without a browser (the default CI set).

JupyterHub from PyPI and configurable-http-proxy from npm on 127.0.0.1, with the configuration
instructors are shown (tests/hub/jupyterhub_config.py); two students who are real Unix users;
nbgrader's exchange in a temp folder; the grading service (``python -m autograder serve``)
started by the hub as its managed service. The instructor releases lab 00 with nbgrader; each
student, through their own JupyterLab that the hub started as them, fetches and submits with
nbgrader's Assignment List server API (the calls the Assignment List makes) -- ann the solution,
bob the blank lab; the service grades both; each student's Fetch Feedback brings nbgrader's page
with the grader's verdicts, and the gradebook holds both scores.

Skipped where it cannot run (not root, no JupyterHub or configurable-http-proxy), unless
``COURSE_KIT_REQUIRE_HUB=1`` (.ci/run sets it): then it fails.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from urllib.parse import quote

import nbformat
import pytest
from nbgrader.api import Gradebook

import hubsite
from autograder.grader.service import submission_queue as sq
from hubsite import COURSE_ID, LAB
from notebooks import sandboxed, solution

FEEDBACK_TIMEOUT_S = 420  # both gradings, one after the other (a sandboxed lab 00 solution takes ~1-2 min here)

# In the default set. Inside full CI runs both failed (2026-12-07): on a loaded machine bob's
# submission reaches the exchange while ann's round runs, and his page then shows it "arrived"
# (the status page's state for that), which this test did not yet accept; the status-page test
# failed after it, finding no graded entry.
pytestmark = [pytest.mark.slow, pytest.mark.grading]


@pytest.fixture(scope="module")
def hub():
    """The hub, its two students (ann, bob: Unix users named with a random tag), lab 00 released,
    their servers started."""
    tag = secrets.token_hex(2)
    names = {"ann": f"ck{tag}ann", "bob": f"ck{tag}bob"}
    with hubsite.running(list(names.values()), "--poll 1" + ("" if sandboxed() else " --unsandboxed")) as site:
        site.names = names
        yield site


def _released(hub, student: str) -> dict:
    """Lab 00 as the student's Assignment List lists it."""
    listing = hub.as_student(student, "GET", f"assignments?course_id={COURSE_ID}")
    assert listing["success"], listing
    return {a["assignment_id"]: a for a in listing["value"] if a["status"] in ("released", "fetched")}


def _submit(hub, student: str, notebook: dict | None) -> float:
    """Fetch lab 00, save ``notebook`` over it (as JupyterLab saves), submit; when it was submitted."""
    assert LAB in _released(hub, student)
    fetched = hub.as_student(student, "POST", "assignments/fetch", {"course_id": COURSE_ID, "assignment_id": LAB})
    assert fetched["success"], fetched
    if notebook is not None:
        hub.as_student(student, "PUT", f"api/contents/{LAB}/{LAB}.ipynb", {"type": "notebook", "format": "json",
                                                                            "content": notebook})
    done = hub.as_student(student, "POST", "assignments/submit", {"course_id": COURSE_ID, "assignment_id": LAB})
    assert done["success"], done
    return time.monotonic()


def _feedback(hub, student: str) -> str | None:
    """Fetch Feedback, as the student; the fetched page's text, or ``None`` when none came."""
    listing = hub.as_student(student, "POST", "assignments/fetch_feedback", {"course_id": COURSE_ID,
                                                                             "assignment_id": LAB})
    assert listing["success"], listing
    for item in listing["value"]:
        for sub in item.get("submissions", []):  # the submitted ones, grouped by assignment
            for nb in sub["notebooks"]:
                if nb["has_local_feedback"]:
                    path = nb["local_feedback_path"]  # relative to the student's JupyterLab root, their home
                    path = quote(os.path.relpath(path, f"/home/{student}") if os.path.isabs(path) else
                                 os.path.normpath(path))
                    return hub.as_student(student, "GET", f"api/contents/{path}?content=1&type=file&format=text")[
                        "content"]
    return None


def _own_rows_once_seen(hub, student: str, timeout_s: float = 30) -> dict:
    """The student's newest entry on the service's page (logged in through the hub), once the
    service has seen the submission."""
    session, _ = _logged_in(hub, student, "/services/autograder/")
    deadline = time.monotonic() + timeout_s
    while not (rows := session.get(f"{hub.url}/services/autograder/", params={"format": "json"}, timeout=30).json()):
        assert time.monotonic() < deadline, f"{student}'s submission never reached the service's page"
        time.sleep(0.5)
    return rows[0]


def test_students_submit_through_the_hub_and_fetch_the_graders_feedback(hub):
    began = time.monotonic()
    ann, bob = hub.names["ann"], hub.names["bob"]
    answer = json.loads(nbformat.writes(nbformat.read(solution(LAB), as_version=4)))
    submitted = {ann: _submit(hub, ann, answer), bob: _submit(hub, bob, None)}
    waiting = _own_rows_once_seen(hub, bob)  # while ann's is graded: bob's place in line, on his page
    # arrived: in the exchange while ann's round runs (the service takes it in when that round
    # ends); queued: taken in before it began -- which depends on how fast the machine is
    assert waiting["state"] in (sq.ARRIVED, sq.QUEUED, sq.GRADING, sq.GRADED), waiting
    if waiting["state"] in (sq.ARRIVED, sq.QUEUED):
        assert waiting["position"] >= 1, waiting
    pages, waited = {}, {}
    deadline = time.monotonic() + FEEDBACK_TIMEOUT_S
    while len(pages) < 2:
        assert time.monotonic() < deadline, f"no feedback in {FEEDBACK_TIMEOUT_S} s:\n{hub.log_tail()}"
        for student in (ann, bob):
            if student not in pages and (page := _feedback(hub, student)) is not None:
                pages[student], waited[student] = page, time.monotonic() - submitted[student]
        time.sleep(2)
    book, _ = sq.Store(hub.course).load()
    entries = {e.student: e for e in book.values()}
    with Gradebook(f"sqlite:///{hub.course / 'gradebook.db'}") as gb:
        scores = {s: gb.find_submission(LAB, s).score for s in (ann, bob)}
        top = gb.find_assignment(LAB).max_score
    assert scores[ann] == top > 0 and scores[bob] == 0, (scores, top)
    assert f"Feedback for <b>{ann}</b>: <b>{top:g}/{top:g}" in pages[ann], pages[ann][:3000]
    assert f"Feedback for <b>{bob}</b>: <b>0/{top:g}" in pages[bob] and "ray-task" in pages[bob]
    for student in (ann, bob):
        assert entries[student].state == sq.GRADED, entries[student]
        print(f"\n{student}: feedback {waited[student]:.0f} s after submit; graded in "
              f"{entries[student].seconds:.0f} s")
    print(f"whole test {time.monotonic() - began:.0f} s")


def _logged_in(hub, student: str, next_path: str):
    """A browser-like session: the hub's login form (PAM, the student's Unix password), then
    ``next_path``, following the redirects (the service's OAuth round trip included)."""
    import requests

    session = requests.Session()
    session.get(f"{hub.url}/hub/login", timeout=30)
    reply = session.post(f"{hub.url}/hub/login", params={"next": next_path}, timeout=60,
                         data={"username": student, "password": hub.students[student],
                               "_xsrf": session.cookies.get("_xsrf", path="/hub/")})
    return session, reply


def test_the_status_page_shows_each_student_only_their_own_submissions(hub):
    """The service's page behind the hub's login: without a login, the hub's login page; logged
    in, the student's own entries (text and JSON), never another student's."""
    import requests

    page = "/services/autograder/"
    anonymous = requests.get(f"{hub.url}{page}", timeout=30)
    assert anonymous.url.startswith(f"{hub.url}/hub/login"), anonymous.url
    ann, bob = hub.names["ann"], hub.names["bob"]
    for me, other in ((ann, bob), (bob, ann)):
        session, reply = _logged_in(hub, me, page)
        assert reply.status_code == 200 and reply.url.startswith(f"{hub.url}{page}"), (reply.url, reply.text[:500])
        assert f"Your submissions, {me}" in reply.text and other not in reply.text, reply.text
        rows = session.get(f"{hub.url}{page}", params={"format": "json"}, timeout=30).json()
        assert {row["student"] for row in rows} <= {me}, rows
        if rows:  # after the submissions of the test above
            assert f"{LAB} submitted " in reply.text and "graded, " in reply.text, reply.text
