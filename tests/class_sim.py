"""A class at a deadline, simulated: the grading service's own queue, engine and status page on
an emulated Ray cluster, with a stand-in for each grading. Run by tests/test_class_sim.py (a
small class in the default set, the full one in the extended set), or by hand:

    python tests/class_sim.py --students 300 --nodes 16 --slots 2 --out build/class-sim.json

What is real: :class:`autograder.grader.service.serve.Service` (intake from an nbgrader exchange folder,
the fair queue, the rate limit, claiming a free slot at once, the state file), the engine
(:class:`autograder.grader.engine.engine.Engine`: fingerprints, records), the estimated waits each
student's page shows (:func:`autograder.grader.service.status_page.rows`, read the moment they submit),
and Ray's scheduling of one task a grading onto ``--nodes`` nodes of ``--slots`` grading slots
each (``ray.cluster_utils.Cluster``: a raylet a node, on this one machine).

What stands in: a grading is a Ray task that sleeps for a duration drawn from the measured
gradings of its lab (solution or blank, :data:`MEASURED`), and time runs ``--speed`` times
faster than a real class's (every duration and the submission window divided by it; the
figures reported are multiplied back). Left out: the gradings' own CPU and memory (a node's
slots each own their cores in a real cluster), collecting and releasing feedback through
nbgrader, students' servers, the hub, and a node lost during the class.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from notebooks import make_course, released  # noqa: E402

# Seconds one grading took: `python -m autograder check` of each lab's solution and blank
# notebook, sandboxed, one after another on a 2-core machine that other work kept busy
# (2026-12-07; lab 00's solution took 28 s on the same machine when it was quieter). What the
# simulation's findings rest on is their spread -- a lab 04 solution takes 3.7x its blank, a lab
# 02 blank (calls that wait for their timeouts) more than its solution -- not their size.
MEASURED = {
    "00_measure": {"solution": [55.0], "blank": [37.0]},
    "02_restart_recovery": {"solution": [118.0], "blank": [150.0]},
    "04_data_affinity": {"solution": [271.0], "blank": [73.0]},
}
COURSE_ID = "kit101"


@dataclass(frozen=True)
class Submission:
    at: float          # seconds into the window (simulated time)
    student: str
    lab: str
    kind: str          # solution or blank: which measured durations its grading is drawn from


def plan(students: int, window_s: float, seed: int) -> list[Submission]:
    """Each student submits once, or (one in three) twice, at times drawn uniformly over the
    last ``window_s`` seconds before the deadline; each submission a lab of :data:`MEASURED`."""
    rng = random.Random(seed)
    out = []
    for k in range(students):
        lab = rng.choice(sorted(MEASURED))
        times = sorted(rng.uniform(0, window_s) for _ in range(2 if rng.random() < 1 / 3 else 1))
        for n, t in enumerate(times):
            kind = "solution" if (n == len(times) - 1 or rng.random() < 0.5) else "blank"
            out.append(Submission(t, f"s{k:03d}", lab, kind))
    return sorted(out, key=lambda s: s.at)


class SleepSlots:
    """An engine backend (:class:`autograder.grader.engine.engine.Backend`) whose gradings are Ray tasks
    in grading slots that sleep for their drawn, compressed duration."""

    def __init__(self, durations: dict[tuple[str, str], float]):
        import ray

        from autograder.grader.engine.slots import RESOURCE

        self.durations = durations  # (student, lab) of the submission graded next -> seconds, real time
        self.capacity = int(ray.cluster_resources().get(RESOURCE, 1))
        def pretend(seconds: float) -> tuple[float, str]:
            """The stand-in grading (nested: Ray's workers get it by value, not by a module they
            could not import): it takes ``seconds``; what it took, and its node."""
            import time

            import ray

            began = time.monotonic()
            time.sleep(seconds)
            return time.monotonic() - began, ray.get_runtime_context().get_node_id()[:8]

        self._task = ray.remote(num_cpus=0, resources={RESOURCE: 1})(pretend)
        self._running: dict = {}

    def width(self, lab: str) -> int:
        return 1

    def start(self, job) -> None:
        self._running[self._task.remote(self.durations[(job.student, job.assignment)])] = job

    def wait(self, timeout_s):
        import ray

        from autograder.grader.engine.engine import Finished
        from autograder.report import Outcome, Result

        if not self._running:
            return []
        ready, _ = ray.wait(list(self._running), num_returns=1, timeout=timeout_s)
        out = []
        for ref in ready:
            job, (seconds, node) = self._running.pop(ref), ray.get(ref)
            out.append(Finished(job, Outcome(job.student, job.assignment, [Result("graded", 1, 1)], seconds=seconds),
                                where=node))
        return out

    def close(self) -> None:
        import ray

        for ref in self._running:
            ray.cancel(ref, force=True)
        self._running.clear()


def _course(tmp: Path, students: list[str], speed: float) -> Path:
    """A course with the labs of :data:`MEASURED` released, the students on its roster, an
    exchange, and one recorded grading of each lab (an instructor's test grading before the class,
    from which the first waits are estimated)."""
    from nbgrader.api import Gradebook

    course = make_course(tmp / "course", [])
    root = tmp / "exchange"
    (root / COURSE_ID / "inbound").mkdir(parents=True)
    with open(course / "nbgrader_config.py", "a") as f:
        f.write(f"\nc.CourseDirectory.course_id = {COURSE_ID!r}\nc.Exchange.root = {str(root)!r}\n")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for lab in MEASURED:
            (course / "labs" / lab).mkdir(parents=True)
            shutil.copy(released(lab), course / "labs" / lab)
            gb.update_or_create_assignment(lab)
        for s in students:
            gb.update_or_create_student(s)
    from autograder.grader.engine import resume

    for lab, kinds in MEASURED.items():
        record = course / resume.FOLDER / lab / "teacher.json"
        record.parent.mkdir(parents=True, exist_ok=True)
        seconds = statistics.median(kinds["solution"]) / speed
        record.write_text(json.dumps({"fingerprint": "", "outcome": {"seconds": seconds}}))
    return course


def _submit(course: Path, s: Submission, k: int) -> str:
    """``s`` in the exchange as nbgrader's submit leaves it; its inbound folder's name."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()) + f".{k:06d} UTC"
    inbound = course.parent / "exchange" / COURSE_ID / "inbound"
    folder = inbound / f".{s.student}+{s.lab}+{stamp}+r{k}"
    folder.mkdir()
    shutil.copy(released(s.lab), folder / f"{s.lab}.ipynb")
    (folder / "timestamp.txt").write_text(stamp)
    (folder / "submission_secret.txt").write_text("s3cret")
    final = inbound / folder.name[1:]
    folder.rename(final)  # complete at once, as the service sees it
    return final.name


def run(students: int = 300, nodes: int = 16, slots: int = 2, window_s: float = 600.0, speed: float = 20.0,
        seed: int = 7, tmp: Path | None = None) -> dict:
    """Simulate the class; the measurements (in real, not compressed, seconds)."""
    import tempfile

    import ray
    from ray.cluster_utils import Cluster

    from autograder.grader.service import serve, status_page
    from autograder.grader.engine.limits import Limits
    from autograder.grader.service import submission_queue as sq
    from autograder.grader.engine.slots import RESOURCE

    subs = plan(students, window_s, seed)
    rng = random.Random(seed + 1)
    drawn = {k: rng.choice(MEASURED[s.lab][s.kind]) for k, s in enumerate(subs)}
    tmp = Path(tmp or tempfile.mkdtemp(prefix="class-sim-"))
    course = _course(tmp, sorted({s.student for s in subs}), speed)
    started = time.monotonic()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "resources": {RESOURCE: slots}})
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=0, resources={RESOURCE: slots})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    cluster_s = time.monotonic() - started
    durations: dict[tuple[str, str], float] = {}
    backend = SleepSlots(durations)
    service = serve.Service(course, backend, lambda outcome: "", serve.Options(check_owner=False, poll_s=0.25 / speed,
                                                                                 rate=sq.Rate(5, 24)),
                            limits=Limits())
    shown: dict[str, float | None] = {}
    names: dict[str, int] = {}
    begun = time.time()

    def submitter() -> None:
        for k, s in enumerate(subs):
            time.sleep(max(0.0, begun + s.at / speed - time.time()))
            # the duration its grading will take, known to the stand-in only (a real grading's is not known)
            name = _submit(course, s, k)
            names[name] = k
            durations[(s.student, s.lab)] = drawn[k] / speed
            rows = status_page.rows(course, s.student)
            shown[name] = next((r["wait_s"] for r in rows if r["name"] == name), None)

    thread = threading.Thread(target=submitter, daemon=True)
    thread.start()
    try:
        while thread.is_alive() or service.engine.busy() or sq.order(service.book) or _unseen(service):
            service.admit()
            service.fill()
            if service.engine.busy():
                service.collect_ended(0.25 / speed)
            else:
                time.sleep(0.25 / speed)
    finally:
        service.engine.close()
        ray.shutdown()
        cluster.shutdown()
        Path("/tmp/ray/ray_current_cluster").unlink(missing_ok=True)
    return _measure(service.book, subs, drawn, names, shown, begun, nodes * slots, speed, cluster_s)


def _unseen(service) -> bool:
    """Whether the exchange holds a complete submission the service has not taken in yet."""
    from autograder.grader.nbgrading import exchange

    complete, _ = exchange.scan(service.where)
    return any(i.name not in service.book for i in complete)


def _measure(book, subs, drawn, names, shown, begun, slots, speed, cluster_s) -> dict:
    """Makespan against its bound, the fairness rule, and each student's shown wait against the
    wait they had, in real seconds."""
    from autograder.grader.service import submission_queue as sq

    graded = [e for e in book.values() if e.state == sq.GRADED]
    replaced = [e for e in book.values() if e.state == sq.REPLACED]
    work = sum(drawn[names[e.name]] for e in graded)
    longest = max(drawn[names[e.name]] for e in graded)
    first_arrival = min(e.seen for e in book.values())
    makespan = (max(e.finished for e in graded) - first_arrival) * speed
    last_arrival = (max(e.seen for e in book.values()) - first_arrival) * speed
    bound = max(work / slots, last_arrival) + longest
    errors, unknown = [], 0
    for name, w in shown.items():
        e = book.get(name)
        if e is None or e.state != sq.GRADED:
            continue
        real = (e.finished - e.seen) * speed
        if w is None:
            unknown += 1
        elif real > 0:
            errors.append(abs(w * speed - real) / real)
    return {
        "submissions": len(subs), "graded": len(graded), "replaced": len(replaced),
        "lost": len(subs) - len(graded) - len(replaced),
        "slots": slots, "speed": speed, "cluster_start_s": round(cluster_s, 1),
        "work_s": round(work), "longest_s": round(longest), "last_arrival_s": round(last_arrival),
        "makespan_s": round(makespan), "bound_s": round(bound), "makespan_over_bound": round(makespan / bound, 3),
        "unfair": unfair(book), "overlapping": overlapping(book),
        "estimates": len(errors), "estimates_unknown": unknown,
        "estimate_error_median": round(statistics.median(errors), 3) if errors else None,
        "estimate_error_p90": round(sorted(errors)[int(0.9 * (len(errors) - 1))], 3) if errors else None,
        "estimates_within_25pct": round(sum(x <= 0.25 for x in errors) / len(errors), 3) if errors else None,
    }


def overlapping(book) -> int:
    """Pairs of one student's gradings that ran at the same time (the rule: at most one)."""
    from autograder.grader.service import submission_queue as sq

    runs: dict[str, list[tuple[float, float]]] = {}
    for e in book.values():
        if e.state == sq.GRADED:
            runs.setdefault(e.student, []).append((e.started, e.finished))
    return sum(1 for spans in runs.values() for a, b in zip(sorted(spans), sorted(spans)[1:]) if b[0] < a[1])


def unfair(book) -> int:
    """Claims that broke fair order, read back from the book alone: a grading that started while
    a submission with an earlier ticket waited (a ticket: when the submission took its place in
    line, but never earlier than the start of its student's last grading), its student idle."""
    from autograder.grader.service import submission_queue as sq

    ran = [e for e in book.values() if e.state == sq.GRADED]
    bad = 0
    for b in ran:
        t = b.started

        def ticket(e):
            last = max((o.started for o in ran if o.student == e.student and o.started < t), default=0.0)
            return (max(e.place, last), e.name)

        busy = {o.student for o in ran if o.started < t < o.finished}
        waiting = [a for a in ran if a.student != b.student and a.student not in busy and a.seen < t < a.started]
        bad += any(ticket(a) < ticket(b) for a in waiting)
    return bad


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--students", type=int, default=300)
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--slots", type=int, default=2)
    p.add_argument("--window", type=float, default=600.0, help="seconds before the deadline they submit in")
    p.add_argument("--speed", type=float, default=20.0, help="how much faster than a real class time runs")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    result = run(a.students, a.nodes, a.slots, a.window, a.speed, a.seed)
    print(json.dumps(result, indent=1))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
