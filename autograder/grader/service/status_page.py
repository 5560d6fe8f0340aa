"""The grading service's page, behind the hub's login: each student sees only their own submissions.

When ``python -m autograder serve`` runs as a JupyterHub managed service with a ``url``, the hub
gives it ``JUPYTERHUB_SERVICE_URL`` (where to listen), ``JUPYTERHUB_SERVICE_PREFIX`` (the path the
hub's proxy sends to it, ``/services/<name>/``) and the OAuth client the hub registered for it.
:func:`start` then serves, in a thread of the service's process, one page at that prefix:

* ``/services/<name>/`` -- the logged-in student's own entries, newest first, in words
  (the lines ``serve --status STUDENT`` prints: queue place, estimated wait, score, or why a
  submission was not graded); ``?format=json`` gives the same rows as JSON.

Authentication is JupyterHub's own (:class:`jupyterhub.services.auth.HubOAuthenticated`): a
request without the service's login cookie is sent through the hub's OAuth to its login page,
and only users the hub grants ``access:services!service=<name>`` get in. The page reads the
queue's state file (:class:`autograder.grader.service.submission_queue.Store`, rewritten atomically) at
each request; it never writes anything.
"""

from __future__ import annotations

import html
import json
import os
import threading
from pathlib import Path
from urllib.parse import urlparse

from . import submission_queue as sq

URL_VARIABLE = "JUPYTERHUB_SERVICE_URL"  # set by JupyterHub for a managed service with a ``url``


def wanted() -> bool:
    """Whether this process runs as a hub service that has a page (the hub gave it a URL)."""
    return bool(os.environ.get(URL_VARIABLE))


def rows(course: Path, student: str, now: float | None = None) -> list[dict]:
    """The student's own entries, newest first, as ``serve --status`` shows them: those the
    service has taken in (:func:`autograder.grader.service.submission_queue.status`), and before them
    those of theirs that arrived in the exchange while the service was grading (it takes new
    submissions in as a grading ends), each placed after everything already waiting. Waits are
    estimated per lab, from the first submission on: from the service's gradings, and before
    its first of a lab from the course's recorded ones (:func:`autograder.grader.engine.resume.seconds_by_lab`)."""
    import time

    from ..engine import resume

    book, service = sq.Store(course).load()
    slots = int(service.get("slots", 1))
    now = time.time() if now is None else now
    seconds = sq.lab_seconds(book, resume.seconds_by_lab(course))
    return arrivals(course, book, student, slots, now, seconds) + sq.status(book, student, slots, now, seconds)


def arrivals(course: Path, book: sq.Book, student: str, slots: int, now: float,
             seconds: dict[str, float]) -> list[dict]:
    """The student's complete submissions in the exchange the service has not taken in yet, as
    status rows (state ``arrived``), newest first; none where the exchange cannot be read."""
    import math

    from ..nbgrading import exchange
    from ..errors import SetupError

    try:
        complete, _ = exchange.scan(exchange.place(course))
    except (OSError, SetupError):
        return []
    waiting = len(sq.order(book))
    new = [i for i in complete if i.name not in book]
    wait = sq.waits(book, slots, now, seconds, [(i.name, i.assignment) for i in new])
    out = []
    for k, item in enumerate(new, 1):
        if item.student == student:
            w = wait.get(item.name)
            out.append({"name": item.name, "student": item.student, "lab": item.assignment,
                        "submitted": item.timestamp, "when": item.when, "seen": 0.0, "state": sq.ARRIVED,
                        "message": "arrived while the service was grading: it takes it in when a grading ends, "
                                   "after what was already waiting",
                        "position": waiting + k, "score": None, "max_score": None,
                        "wait_s": None if w is None else math.ceil(w)})
    return sorted(out, key=lambda r: (r["when"], r["name"]), reverse=True)


def render(student: str, entries: list[dict]) -> str:
    """The page: one line per submission, newest first (everything from the queue escaped)."""
    items = "".join(f"<li>{html.escape(sq.describe(row))}</li>" for row in entries)
    body = f"<ol>{items}</ol>" if entries else "<p>No submission of yours has reached the grading service yet.</p>"
    return (f"<!doctype html><html><head><meta charset=utf-8><title>Your submissions</title></head><body "
            f"style=\"font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto\"><h1>Your submissions, "
            f"{html.escape(student)}</h1>{body}<p>Newest first. Fetch Feedback in the Assignment List brings a "
            "graded submission's feedback.</p></body></html>")


def application(course: Path):
    """The tornado application: the page and the OAuth callback, at the hub's prefix."""
    from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated
    from tornado.web import Application, RequestHandler, authenticated

    class Page(HubOAuthenticated, RequestHandler):
        """The logged-in student's own entries."""

        @authenticated
        def get(self) -> None:
            student = self.get_current_user()["name"]
            entries = rows(course, student)
            if self.get_argument("format", "") == "json":
                self.set_header("Content-Type", "application/json")
                self.finish(json.dumps(entries))
            else:
                self.finish(render(student, entries))

    auth = HubOAuth(cache_max_age=60)
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/")
    return Application([(prefix, Page), (urlparse(auth.oauth_redirect_uri).path, HubOAuthCallbackHandler)],
                       hub_auth=auth, cookie_secret=os.urandom(32))


def start(course: Path, log) -> threading.Thread:
    """Serve the page at ``$JUPYTERHUB_SERVICE_URL`` in a daemon thread (it ends with the
    service); returns once it listens, or raises why it could not."""
    import asyncio

    where = urlparse(os.environ[URL_VARIABLE])
    app = application(Path(course))
    listening, failed = threading.Event(), []

    async def serve() -> None:
        try:
            app.listen(where.port or 80, where.hostname or "127.0.0.1")
        except Exception as exc:
            failed.append(exc)
            raise
        finally:
            listening.set()
        await asyncio.Event().wait()

    thread = threading.Thread(target=lambda: asyncio.run(serve()), name="status-page", daemon=True)
    thread.start()
    listening.wait(30)
    if failed:
        raise failed[0]
    log(f"the students' status page listens on {where.geturl()} (behind the hub's login)")
    return thread
