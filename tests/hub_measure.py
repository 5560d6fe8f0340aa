"""Measure the course on a real hub (the numbers in docs/instructors/jupyterhub.md); not a test.

    flock /tmp/heavy.lock nice -n 19 python tests/hub_measure.py --students 20 --workers 2 --out build/hub-measure.json

The hub of tests/test_hub.py (tests/hubsite.py), with ``serve --workers N``:

1. *one at a time*: three students submit lab 00 one after another (solution, blank, solution),
   each once the one before has its feedback: the time from submit to feedback fetched, next to
   the grading's own time;
2. *bad input*: a student not on the roster, a file that is not a notebook, another lab's
   notebook, a 200 MB notebook, each through the Assignment List's submit; and the service
   killed (as a crash) while a grading runs, with a submission arriving while it is down (the
   hub starts it again): what each student's submit answered and what their status page says;
3. *a class*: every student submits within ``--window`` seconds (solutions and blanks
   alternating): all graded?, the order they were graded in, and the wait each student's page
   showed right after submitting next to the wait they had.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nbformat  # noqa: E402

import hubsite  # noqa: E402
import test_hub  # noqa: E402
from autograder.grader.service import submission_queue as sq  # noqa: E402
from hubsite import COURSE_ID, LAB  # noqa: E402
from notebooks import ROOT, released, solution  # noqa: E402


def notebook_json(path: Path) -> dict:
    return json.loads(nbformat.writes(nbformat.read(path, as_version=4)))


def wait_feedback(hub, student: str, timeout_s: float = 900) -> float:
    """Poll Fetch Feedback as the student; when their feedback came."""
    deadline = time.monotonic() + timeout_s
    while test_hub._feedback(hub, student) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no feedback for {student}")
        time.sleep(1)
    return time.monotonic()


def entries(hub) -> dict[str, list[sq.Entry]]:
    book, _ = sq.Store(hub.course).load()
    out: dict[str, list[sq.Entry]] = {}
    for e in sorted(book.values(), key=lambda e: e.seen):
        out.setdefault(e.student, []).append(e)
    return out


def one_at_a_time(hub, students: list[str]) -> list[dict]:
    answer = notebook_json(solution(LAB))
    rows = []
    for k, student in enumerate(students):
        began = test_hub._submit(hub, student, answer if k != 1 else None)
        got = wait_feedback(hub, student)
        while (e := entries(hub)[student][-1]).state == sq.GRADING:  # feedback is released before the entry is saved
            time.sleep(0.2)
        rows.append({"student": student, "kind": "blank" if k == 1 else "solution", "feedback_s": got - began,
                     "grading_s": e.seconds, "score": e.score, "state": e.state})
        print(rows[-1], flush=True)
    return rows


def page_rows(hub, student: str) -> list[dict]:
    session, _ = test_hub._logged_in(hub, student, "/services/autograder/")
    return session.get(f"{hub.url}/services/autograder/", params={"format": "json"}, timeout=30).json()


def write_as(student: str, path: str, python: str) -> None:
    """Run ``python`` as the student (their own files, as if made in their JupyterLab's terminal)."""
    hubsite.run(["runuser", "-u", student, "--", sys.executable, "-c", python], cwd=f"/home/{student}",
                timeout=300)


def bad_inputs(hub, students: dict[str, str]) -> list[dict]:
    """Each bad submission through the Assignment List API; what submit said and the page says."""
    out = []

    def submit(student: str, prepare) -> None:
        hub.as_student(student, "POST", "assignments/fetch", {"course_id": COURSE_ID, "assignment_id": LAB})
        prepare(student)
        said = hub.as_student(student, "POST", "assignments/submit", {"course_id": COURSE_ID, "assignment_id": LAB})
        time.sleep(4)
        rows = page_rows(hub, student)
        out.append({"student": student, "submit_success": said.get("success"),
                    "submit_said": str(said.get("value"))[-300:] if not said.get("success") else "",
                    "page": sq.describe(rows[0]) if rows else "(nothing on the page)"})
        print(out[-1], flush=True)

    nb = f"{LAB}/{LAB}.ipynb"
    submit(students["stranger"], lambda s: None)
    submit(students["text"], lambda s: write_as(s, nb, f"open({nb!r}, 'w').write('my answers, typed in a text editor')"))
    other = released("01_actor_scaling")
    submit(students["other"], lambda s: write_as(s, nb, f"open({nb!r}, 'wb').write(open({str(other)!r}, 'rb').read())"))
    big = ("import json; nb = json.load(open(%r)); c = nb['cells'][0]; "
           "c['source'] = ''.join(c['source']) + '#' * (200 * 2**20); "
           "json.dump(nb, open(%r, 'w'))" % (nb, nb))
    submit(students["big"], lambda s: write_as(s, nb, big))
    return out


def restart(hub, first: str, second: str) -> dict:
    """``first`` submits the solution; the service is killed while grading it; ``second``
    submits while it is down; the hub starts it again."""
    answer = notebook_json(solution(LAB))
    t0 = test_hub._submit(hub, first, answer)
    while not any(e.state == sq.GRADING for e in entries(hub).get(first, [])):
        time.sleep(0.5)
    time.sleep(5)
    pid = service_pid(hub)
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    t1 = test_hub._submit(hub, second, None)
    while service_pid(hub) in (None, pid):
        time.sleep(0.5)
    back = time.monotonic() - killed
    done = {first: wait_feedback(hub, first) - t0, second: wait_feedback(hub, second) - t1}
    last = {s: entries(hub)[s][-1] for s in (first, second)}
    out = {"service_back_after_s": back, "feedback_s": done,
           "states": {s: (e.state, e.score, e.attempts, e.message) for s, e in last.items()}}
    print(out, flush=True)
    return out


def service_pid(hub) -> int | None:
    mark = f"serve\0{hub.course}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark in (entry / "cmdline").read_bytes():
                    return int(entry.name)
            except OSError:
                pass
    return None


def shown_once_seen(hub, student: str, since: float, timeout_s: float = 20) -> dict:
    """What the student's page shows for their newest submission once the service has seen it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rows = page_rows(hub, student)
        # taken in (``seen``) or, while the service grades, shown as arrived (its submit time)
        if rows and max(rows[0]["seen"], rows[0].get("when") or 0.0 if rows[0]["state"] == sq.ARRIVED else 0.0) >= since - 1:
            return {k: rows[0][k] for k in ("position", "wait_s", "state")} | {"line": sq.describe(rows[0])}
        time.sleep(0.5)
    return {"state": "not seen in 20 s"}


def a_class(hub, students: list[str], window_s: float) -> dict:
    answer = notebook_json(solution(LAB))
    gap = window_s / len(students)
    shown, submitted = {}, {}
    for k, student in enumerate(students):
        submitted[student] = time.time()
        test_hub._submit(hub, student, answer if k % 2 == 0 else None)
        shown[student] = shown_once_seen(hub, student, submitted[student])
        time.sleep(max(0.0, submitted[student] + gap - time.time()))
    for student in students:
        wait_feedback(hub, student, timeout_s=1800)
    while any(e.state == sq.GRADING for es in entries(hub).values() for e in es):
        time.sleep(0.5)
    book = entries(hub)
    rows = []
    for student in students:
        e = book[student][-1]
        rows.append({"student": student, "state": e.state, "score": e.score, "shown": shown[student],
                     "waited_s": e.started - e.seen, "waited_from_submit_s": e.started - submitted[student],
                     "grading_s": e.seconds, "feedback_after_s": e.finished - e.seen,
                     "started": e.started})
    order = [r["student"] for r in sorted(rows, key=lambda r: r["started"])]
    out = {"submitted_order": students, "graded_order": order, "rows": rows,
           "all_graded": all(r["state"] == sq.GRADED for r in rows)}
    for r in rows:
        print(r, flush=True)
    return out


def main() -> int:
    args = argparse.ArgumentParser()
    args.add_argument("--students", type=int, default=20)
    args.add_argument("--workers", type=int, default=2)
    args.add_argument("--window", type=float, default=60)
    args.add_argument("--out", type=Path, default=ROOT / "build" / "hub-measure.json")
    args.add_argument("--phases", default="one,bad,restart,class", help="which parts to run (comma-separated)")
    a = args.parse_args()
    tag = secrets.token_hex(2)
    names = [f"ck{tag}s{k:02d}" for k in range(a.students)]
    extra = {what: f"ck{tag}{what}" for what in ("stranger", "text", "other", "big", "crash", "late")}
    options = f"--poll 1 --workers {a.workers}"
    hub = hubsite.prepare(names + list(extra.values()), options)
    traversal = hubsite.Traversal([sys.prefix, os.path.realpath(sys.executable)])
    result = {"date": time.strftime("%Y-%m-%d"), "workers": a.workers, "cores": os.cpu_count()}
    try:
        for name, password in hub.students.items():
            hubsite.add_user(name, password)
        traversal.grant(list(hub.students))
        hubsite.nbgrader(hub.course, "generate_assignment", LAB)
        for name in hub.students:
            if name != extra["stranger"]:
                hubsite.nbgrader(hub.course, "db", "student", "add", name)
        hubsite.nbgrader(hub.course, "release_assignment", LAB)
        hubsite.start(hub, options)
        for name in hub.students:
            hub.start_server(name)
        print("servers up", flush=True)
        phases = a.phases.split(",")
        if "one" in phases:
            result["one_at_a_time"] = one_at_a_time(hub, names[:3])
        if "bad" in phases:
            result["bad_inputs"] = bad_inputs(hub, extra)
        if "restart" in phases:
            result["restart"] = restart(hub, extra["crash"], extra["late"])
        if "class" in phases:
            result["class"] = a_class(hub, names, a.window)
    finally:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=1, default=str))
        (a.out.parent / "hub-measure.log").write_text(hub.log_tail(10**7))
        hubsite.stop(hub)
        traversal.restore()
        for name in hub.students:
            hubsite.remove_user(name)
        subprocess.run(["rm", "-rf", str(hub.base)])
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
