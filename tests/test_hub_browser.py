"""The course on a real JupyterHub, in a real browser (the extended set; CI runs tests/test_hub.py).

The hub of tests/test_hub.py plus the instructor's formgrader as a hub service
(tests/hub/browser_config.py). Debian's Chromium, driven by Playwright: the instructor has
released lab 00; three students log in on the hub's login page, open nbgrader's Assignment
List in their JupyterLab, Fetch lab 00, save their work over it (the solution, the blank lab,
and an attack from the kit's own corpus: ``gradebook-own-rows`` of tests/attacks_lab00.py),
Submit, then press Fetch Feedback until it comes and open the page. The instructor's formgrader
shows the three scores, and ``nbgrader export`` writes the CSV. Screenshots of each student's
feedback and of the formgrader are kept in :data:`SHOTS`.
"""

from __future__ import annotations

import csv
import json
import os
import secrets
import time
from pathlib import Path
from urllib.parse import quote

import nbformat
import pytest
from nbgrader.api import Gradebook

import attacks_lab00
import hubsite
from autograder.grader.session import catalog
from hubsite import LAB
from notebooks import ROOT, only_extended, sandboxed, solution, variant
from test_browser import browser  # noqa: F401 -- the fixture: Debian's Chromium, as the JupyterLab test launches it

SHOTS = Path(os.environ.get("COURSE_KIT_SCREENSHOTS", ROOT / "build" / "screenshots")) / "hub"
ATTACK = "gradebook-own-rows"
FEEDBACK_TIMEOUT_S = 420

pytestmark = [pytest.mark.slow, pytest.mark.grading, only_extended("tests/test_hub.py, the same hub without a browser")]


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    tag = secrets.token_hex(2)
    names = {"solution": f"ck{tag}sol", "blank": f"ck{tag}blank", "attack": f"ck{tag}atk"}
    instructor = f"ck{tag}ins"
    env = {"COURSE_HUB_FORMGRADER_URL": f"http://127.0.0.1:{hubsite.free_port()}",
           "COURSE_HUB_INSTRUCTOR": instructor}
    options = "--poll 1" + ("" if sandboxed() else " --unsandboxed")
    os.environ["AUTOGRADER_SEED"] = str(attacks_lab00.SEED)  # the attacks assume an instructor's fixed seed
    try:
        with hubsite.running([*names.values(), instructor], options, roster=list(names.values()),
                             driver=hubsite.ROOT / "tests" / "hub" / "browser_config.py", start_servers=False,
                             env=env) as site:
            site.names, site.instructor = names, instructor
            site.work = tmp_path_factory.mktemp("hub-browser")
            yield site
    finally:
        os.environ.pop("AUTOGRADER_SEED", None)


def _login(browser, hub, user: str):
    """A page logged in as ``user`` through the hub's login form, on their JupyterLab."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", hub.students[user])
    page.click("#login_submit")
    page.wait_for_url(f"**/user/{user}/lab**", timeout=120_000)
    page.locator(".jp-LabShell").wait_for(timeout=120_000)
    return page


def _assignment_list(page):
    """Nbgrader > Assignment List, from JupyterLab's menu."""
    page.get_by_role("menuitem", name="Nbgrader").click()
    page.get_by_role("menuitem", name="Assignment List").click()
    page.locator("#released_assignments_list").wait_for(timeout=60_000)


def _save(page, user: str, notebook: dict) -> None:
    """Save ``notebook`` over the fetched lab with JupyterLab's contents API, from the page (the
    student's own session and XSRF cookie), as saving in JupyterLab does."""
    status = page.evaluate("""async ([url, body]) => {
        const xsrf = document.cookie.split('; ').find(c => c.startsWith('_xsrf='))?.split('=')[1] || '';
        const r = await fetch(url, {method: 'PUT', body, headers: {'Content-Type': 'application/json',
                                                                     'X-XSRFToken': decodeURIComponent(xsrf)}});
        return r.status; }""", [f"/user/{user}/api/contents/{LAB}/{LAB}.ipynb",
                                json.dumps({"type": "notebook", "format": "json", "content": notebook})])
    assert status in (200, 201), status


def _notebooks(work: Path) -> dict[str, dict | None]:
    """What each student saves: the solution, nothing (the blank lab as fetched), the attack."""
    spec = {k: v for k, v in attacks_lab00.ATTACKS[ATTACK].items()
            if k not in ("honest", "may_lose", "why", "open_issue", "static_flag", "extended")}
    attack = variant(LAB, work / f"{ATTACK}.ipynb", **spec)
    as_json = lambda p: json.loads(nbformat.writes(nbformat.read(p, as_version=4)))  # noqa: E731
    return {"solution": as_json(solution(LAB)), "blank": None, "attack": as_json(attack)}


def _fetch_and_submit(page, hub, user: str, notebook: dict | None) -> None:
    _assignment_list(page)
    released = page.locator("#released_assignments_list .list_item:not(.nested_list_item)", has_text=LAB)
    released.get_by_role("button", name="Fetch").click()
    fetched = page.locator("#fetched_assignments_list .list_item:not(.nested_list_item)", has_text=LAB)
    fetched.wait_for(timeout=60_000)
    if notebook is not None:
        _save(page, user, notebook)
    fetched.get_by_role("button", name="Submit").first.click()
    page.locator("#submitted_assignments_list .list_item:not(.nested_list_item)", has_text=LAB).first.wait_for(timeout=60_000)


def _fetch_feedback(page, deadline: float, shot: Path) -> None:
    """Press Fetch Feedback until the Assignment List shows "(view feedback)"."""
    listing = page.locator("#submitted_assignments_list")
    while not listing.get_by_text("(view feedback)").count():
        if time.monotonic() > deadline:
            page.screenshot(path=str(shot), full_page=True)
            raise AssertionError(f"no feedback came (screenshot: {shot})")
        button = listing.locator("button", has_text="Fetch Feedback")
        if button.count() and button.first.is_enabled():
            button.first.click()
        page.wait_for_timeout(3000)


def test_three_students_in_the_browser_and_the_instructors_formgrader(browser, hub):  # noqa: F811
    SHOTS.mkdir(parents=True, exist_ok=True)
    saved = _notebooks(hub.work)
    pages = {}
    for kind, user in hub.names.items():
        pages[kind] = _login(browser, hub, user)
        _fetch_and_submit(pages[kind], hub, user, saved[kind])
    deadline = time.monotonic() + FEEDBACK_TIMEOUT_S
    texts = {}
    for kind, user in hub.names.items():
        page = pages[kind]
        _fetch_feedback(page, deadline, SHOTS / f"no-feedback-{kind}.png")
        folder = next(Path(f"/home/{user}/{LAB}/feedback").iterdir()).name
        page.goto(f"{hub.url}/user/{user}/files/{LAB}/feedback/{quote(folder)}/{LAB}.html")
        page.locator("#autograder-feedback").wait_for(timeout=30_000)
        texts[kind] = page.locator("#autograder-feedback").inner_text()
        page.screenshot(path=str(SHOTS / f"feedback-{kind}.png"), full_page=True)
        page.close()
    points = {n: c.points for n, c in catalog.for_lab(LAB).items()}
    top, honest = sum(points.values()), sum(points[c] for c in attacks_lab00.ATTACKS[ATTACK]["honest"])
    with Gradebook(f"sqlite:///{hub.course / 'gradebook.db'}") as gb:
        scores = {kind: gb.find_submission(LAB, user).score for kind, user in hub.names.items()}
    assert scores == {"solution": top, "blank": 0, "attack": honest}, (scores, texts)

    page = _login_instructor(browser, hub)
    page.goto(f"{hub.url}/services/formgrader/formgrader/manage_students")
    shown = {}
    for kind, user in hub.names.items():
        cell = page.locator("tr", has_text=user).locator(".score")
        cell.wait_for(timeout=60_000)
        shown[kind] = cell.inner_text().strip()
    page.screenshot(path=str(SHOTS / "formgrader.png"), full_page=True)
    page.close()
    assert shown == {kind: f"{scores[kind]:g} / {top:g}" for kind in hub.names}, shown

    hubsite.nbgrader(hub.course, "export")
    rows = {r["student_id"]: r for r in csv.DictReader(open(hub.course / "grades.csv"))}
    assert {u: float(rows[u]["score"]) for u in hub.names.values()} == {u: scores[k] for k, u in hub.names.items()}
    print(f"\nscreenshots: {SHOTS} (feedback-solution/-blank/-attack.png, formgrader.png)")


def _login_instructor(browser, hub):
    """The instructor's page, logged in (their own JupyterLab is not needed: the formgrader is
    the hub's service)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{hub.url}/hub/login?next={quote('/services/formgrader/formgrader/manage_students')}")
    page.fill("#username_input", hub.instructor)
    page.fill("#password_input", hub.students[hub.instructor])
    page.click("#login_submit")
    page.wait_for_url("**/services/formgrader/**", timeout=120_000)
    return page
