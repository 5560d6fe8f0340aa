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
import shutil
import sys
import time
from urllib.parse import quote

import nbformat
import pytest
from nbgrader.api import Gradebook

import hubsite
from autograder.grader import submission_queue as sq
from hubsite import COURSE_ID, LAB
from notebooks import sandboxed, solution

FEEDBACK_TIMEOUT_S = 420  # both gradings, one after the other (a sandboxed lab 00 solution takes ~1-2 min here)

pytestmark = [pytest.mark.slow, pytest.mark.grading]


@pytest.fixture(scope="module")
def hub():
    """The hub, its two students (ann, bob: Unix users named with a random tag), lab 00 released."""
    why = hubsite.unavailable()
    if why:
        if os.environ.get(hubsite.REQUIRE) == "1":
            pytest.fail(f"hub test required ({hubsite.REQUIRE}=1) but {why}")
        pytest.skip(why)
    tag = secrets.token_hex(2)
    names = {"ann": f"ck{tag}ann", "bob": f"ck{tag}bob"}
    options = "--poll 1" + ("" if sandboxed() else " --unsandboxed")
    site = hubsite.prepare(list(names.values()), options)
    traversal = hubsite.Traversal([sys.prefix, os.path.realpath(sys.executable)])  # a venv, and its Python
    try:
        for name, password in site.students.items():
            hubsite.add_user(name, password)
        traversal.grant(list(site.students))
        hubsite.check_student_can_run_python(names["ann"])
        hubsite.nbgrader(site.course, "generate_assignment", LAB)
        for name in site.students:
            hubsite.nbgrader(site.course, "db", "student", "add", name)
        hubsite.nbgrader(site.course, "release_assignment", LAB)
        hubsite.start(site, options)
        site.names = names
        yield site
    finally:
        hubsite.stop(site)
        traversal.restore()
        for name in site.students:
            hubsite.remove_user(name)
        if os.environ.get("COURSE_KIT_KEEP_HUB") != "1":
            shutil.rmtree(site.base, ignore_errors=True)


def _released(hub, student: str) -> dict:
    """Lab 00 as the student's Assignment List lists it."""
    listing = hub.as_student(student, "GET", f"assignments?course_id={COURSE_ID}")
    assert listing["success"], listing
    return {a["assignment_id"]: a for a in listing["value"] if a["status"] == "released"}


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


def test_students_submit_through_the_hub_and_fetch_the_graders_feedback(hub):
    began = time.monotonic()
    ann, bob = hub.names["ann"], hub.names["bob"]
    for student in (ann, bob):
        hub.start_server(student)
    servers = time.monotonic() - began
    answer = json.loads(nbformat.writes(nbformat.read(solution(LAB), as_version=4)))
    submitted = {ann: _submit(hub, ann, answer), bob: _submit(hub, bob, None)}
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
    print(f"servers started in {servers:.0f} s; whole test {time.monotonic() - began:.0f} s")
