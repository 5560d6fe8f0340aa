"""The README's `jupyter lab labs/`, the way a learner uses it: JupyterLab in headless Chromium.

One JupyterLab server on localhost serves a copy of ``labs/``; for each lab, Chromium (Debian's
``chromium``, driven by Playwright; no browser download) opens the notebook, runs every cell
above its first exercise from JupyterLab's own Run menu -- the setup cell included -- then adds
a cell with ``autograder.check()`` above that exercise and runs it. Asserted from the page and
from the saved notebook: no cell raised, each figure drawn so far is an image on the page, and
the check printed its lines and a score. A screenshot of each lab is kept in
:data:`SCREENSHOTS` (the test's failure messages and pytest's summary name it).

Skipped where Chromium or Playwright is missing, unless ``COURSE_KIT_REQUIRE_BROWSER=1``
(``.ci/run`` sets it, and installs both).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from autograder import selfcheck

from autograder.grader.isolation import processes
from notebooks import ROOT, extended, released

CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = Path(os.environ.get("COURSE_KIT_SCREENSHOTS", ROOT / "build" / "screenshots"))
# The flags Chromium needs as root on a machine without a network or a screen.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Every cell in the page (no windowing: a cell below the fold still has its outputs in the DOM),
# and no news or update checks (this machine has no network).
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                        "checkForUpdates": False},
}
RUN_TIMEOUT_S = 240  # the cells above the first exercise (lab 03 starts 16 Ray workers)
QUEUE_WAIT_S = 20    # for a run asked from the menu to show in a cell's prompt ([*] or a count)
STRAY_WAIT_S = 5     # after a kernel's shutdown, before what it left running is ended

pytestmark = [pytest.mark.slow, pytest.mark.grading]


def _browser_available() -> str | None:
    """Why the browser test cannot run here, or None."""
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing (Debian's chromium package)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (the test extra)"
    return None


@pytest.fixture(scope="module")
def browser():
    why = _browser_available()
    if why:
        if os.environ.get("COURSE_KIT_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser test required but {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def jupyter(tmp_path_factory):
    """``jupyter lab`` on localhost serving a copy of labs/ (the server's own settings and
    workspaces in a temp folder); yields (base url, token, the served folder)."""
    root = tmp_path_factory.mktemp("labs")
    for lab in selfcheck.labs():
        shutil.copy(released(lab), root / f"{lab}.ipynb")
    settings = tmp_path_factory.mktemp("lab-settings")
    for name, value in LAB_SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(value))
    port, token = _free_port(), "course-kit-browser-test"
    log = open(tmp_path_factory.mktemp("lab-log") / "jupyter.log", "w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
         f"--port={port}", f"--ServerApp.token={token}", f"--ServerApp.root_dir={root}",
         f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={settings}",
         "--LabApp.news_url=", "--ServerApp.open_browser=False"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PATH": f"{Path(sys.executable).parent}:"
                                                    f"{os.environ.get('PATH', '')}"})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    pytest.fail(f"jupyter lab did not start: {log.read()[-2000:]}")
                time.sleep(0.5)
        yield base, token, root
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _shut_down_kernels(base: str, token: str) -> None:
    """End every notebook session of the server (its kernel, and the Ray that kernel started)."""
    auth = {"Authorization": f"token {token}"}
    with urllib.request.urlopen(urllib.request.Request(f"{base}/api/sessions", headers=auth)) as r:
        sessions = json.load(r)
    for s in sessions:
        urllib.request.urlopen(urllib.request.Request(f"{base}/api/sessions/{s['id']}", method="DELETE",
                                                      headers=auth), timeout=60).close()


def _first_exercise(nb: dict) -> int:
    """Index (among all cells) of the first cell the learner writes."""
    return next(i for i, c in enumerate(nb["cells"])
                if c.get("metadata", {}).get("nbgrader", {}).get("solution"))


def _wait_idle(page, cells, upto: int, timeout_s: float) -> None:
    """Until every code cell above ``upto`` shows an execution count (not ``[*]``, not blank)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        prompts = [cells.nth(i).locator(".jp-InputPrompt").inner_text().strip()
                   for i in range(upto) if "jp-CodeCell" in (cells.nth(i).get_attribute("class") or "")]
        if prompts and all(p.startswith("[") and p[1:-2].strip().isdigit() for p in prompts):
            return
        time.sleep(1)
    raise AssertionError(f"cells above the first exercise still running after {timeout_s:g} s: {prompts}")


def _run_all_above(page, cells, upto: int, tries: int = 3) -> None:
    """Run > Run All Above Selected Cell, from the menu; asked again if no cell took the request
    within :data:`QUEUE_WAIT_S` (a click on a panel that is still being revealed is dropped)."""
    for _ in range(tries):
        cells.nth(upto).click()
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Above Selected Cell").click()
        deadline = time.monotonic() + QUEUE_WAIT_S
        while time.monotonic() < deadline:
            if any(cells.nth(i).locator(".jp-InputPrompt").inner_text().strip() not in ("[ ]:", "")
                   for i in range(upto) if "jp-CodeCell" in (cells.nth(i).get_attribute("class") or "")):
                return
            time.sleep(1)
    raise AssertionError(f"Run All Above Selected Cell started no cell, {tries} times")


# CI drives the first lab through the browser; the others (1-2 min each on a slow 2-core machine,
# their notebooks executed by nbclient in tests/test_labs.py anyway) are the extended set
BROWSER_IN_CI = ("00_measure",)


@pytest.mark.parametrize("lab", [lab if lab in BROWSER_IN_CI else pytest.param(lab, marks=pytest.mark.skipif(
    not extended(), reason="the extended set: COURSE_KIT_EXTENDED=1")) for lab in selfcheck.labs()])
def test_lab_runs_to_its_first_exercise_in_jupyterlab(lab, browser, jupyter):
    base, token, root = jupyter
    nb = json.loads(released(lab).read_text())
    first = _first_exercise(nb)
    shot = SCREENSHOTS / f"{lab}.png"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    leftovers = processes.Leftovers()  # orphans of this lab's kernel end up as this process's children
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        # A workspace of its own: the default one would restore the labs opened before this one,
        # each with a new kernel, and their tabs race this lab's for the page.
        page.goto(f"{base}/lab/workspaces/{lab}/tree/{lab}.ipynb?token={token}")
        cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")
        cells.nth(first).wait_for(timeout=60_000)
        page.locator(".jp-NotebookPanel .jp-Spinner").first.wait_for(state="hidden", timeout=120_000)
        # the kernel is up before anything runs (a run asked for earlier can be dropped)
        page.locator(".jp-StatusBar-Widget", has_text="| Idle").first.wait_for(timeout=120_000)
        _run_all_above(page, cells, first)
        _wait_idle(page, cells, first, RUN_TIMEOUT_S)

        # a cell of the learner's own, above the first exercise: the self-check
        cells.nth(first).click()
        page.keyboard.press("Escape")
        page.keyboard.press("a")
        cells.nth(first).locator(".cm-content").click()
        page.keyboard.type("autograder.check()")
        page.keyboard.press("Shift+Enter")
        check = cells.nth(first).locator(".jp-OutputArea-output")
        check.filter(has_text="score:").wait_for(timeout=RUN_TIMEOUT_S * 1000)
        page.keyboard.press("Control+s")
        time.sleep(1)
        images = page.locator(".jp-OutputArea-output img").count()
        page.screenshot(path=str(shot), full_page=True)
    finally:
        page.close()
        _shut_down_kernels(base, token)  # as a learner closing the lab; the next lab gets the cores
        time.sleep(STRAY_WAIT_S)
        stray = leftovers.end()  # Ray workers outlive a kernel that JupyterLab shut down
        if stray:
            print(f"{lab}: {len(stray)} process(es) outlived the kernel {STRAY_WAIT_S:g} s after its "
                  f"shutdown, ended: {stray[:5]}")

    saved = json.loads((root / f"{lab}.ipynb").read_text())
    ran = saved["cells"][:first + 1]
    errors = [(i, o.get("ename"), o.get("evalue", "")[:200]) for i, c in enumerate(ran) if c["cell_type"] == "code"
              for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"cells raised in JupyterLab: {errors} (screenshot: {shot})"
    drawn = [i for i, c in enumerate(ran) if c["cell_type"] == "code" and "plt.show()" in "".join(c["source"])]
    figures = sum(1 for c in ran for o in c.get("outputs", []) if "image/png" in o.get("data", {}))
    assert figures >= len(drawn) and images >= figures, (
        f"cells {drawn} draw figures: {figures} in the saved notebook, {images} images on the page (screenshot: {shot})")
    text = "".join("".join(o.get("text", "")) for o in saved["cells"][first].get("outputs", []))
    assert "score:" in text and ("FAIL" in text or "SKIP" in text), (
        f"autograder.check() printed {text[-500:]!r} (screenshot: {shot})")
