"""Run real ``nbgrader autograde`` on one submission, with the grader on the other side.

Shared by ``check`` (a throw-away course around one learner notebook) and ``grade`` (an
instructor's course directory). Each submission is graded in its own ``nbgrader`` process
with a wall-clock limit, so a submission that hangs or kills its kernel costs its own grade
and nothing else. This process serves the kernel's hidden test cells
(:class:`autograder.grader.session.session.Session` behind an
:class:`autograder.kernel.channel.Endpoint`); its verdicts, not what the kernel's cells reported,
are the outcome, and every kernel pass it did not confirm is flagged. (A cohort records them in
the real gradebook: :mod:`autograder.grader.nbgrading.scratch_course`.)
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ... import seed
from ..isolation import workspace
from ..isolation.processes import SAFE_PATH, Leftovers, not_ray, run_watched
from ...report import Outcome, Result
from ..errors import SetupError

if TYPE_CHECKING:
    from ..engine.limits import Limits

KIT_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_CELL_TIMEOUT_S = 240
MAX_NOTEBOOK_BYTES = 64 * 2**20  # an autograded notebook read for messages; a bigger one is not read
DEFAULT_SUBMISSION_TIMEOUT_S = 1800
DEFAULT_MEMORY_LIMIT_GIB = 8.0  # one submission's notebook, kernel and what they start (Ray labs:
                                # not the actors, which run under the grader's own Ray)
GRADING_CONFIG = Path(__file__).with_name("grading_config.py")
CONFIG_ARG = f"--JupyterApp.config_file={GRADING_CONFIG.with_suffix('')}"  # nbgrader ignores --config


def cell_timeout(cell) -> int:
    """nbclient's time limit for ``cell`` while autograding (see :mod:`autograder.grader.nbgrading.grading_config`):
    the submission's for a test cell (its source is the instructor's: nbgrader restores it
    from the gradebook, and it hands its check to the grader), the cell limit for the others."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    grading = bool(meta.get("grade")) and not meta.get("solution")
    limit = "AUTOGRADER_SUBMISSION_TIMEOUT_S" if grading else "AUTOGRADER_CELL_TIMEOUT_S"
    return int(float(os.environ.get(limit) or DEFAULT_CELL_TIMEOUT_S))


# Ray's C++ core writes warnings straight to file descriptor 2. By default ipykernel forwards
# fd-level output into the running cell as stderr, and nbgrader then scores that cell 0. The
# kernels nbgrader starts for grading read this IPython profile, which keeps such output in
# the kernel's own log instead (Python-level stderr is unaffected). nbgrader's Execute does
# not let extra kernel arguments be configured, hence a profile.
# a learner's own cluster, which a sandboxed kernel (no network) cannot join
CLUSTER_VARIABLES = ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
KERNEL_CONFIG = "c.IPKernelApp.capture_fd_output = False\n"


def _ipython_dir(cwd: Path) -> Path:
    """A private IPython directory for grading kernels, with :data:`KERNEL_CONFIG`."""
    profile = cwd / ".autograder-ipython" / "profile_default"
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "ipython_kernel_config.py").write_text(KERNEL_CONFIG)
    return profile.parent


def tool_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a subprocess of the kit: this interpreter's ``bin/`` first on PATH.

    nbgrader runs ``alembic`` by name when it creates a gradebook; an interpreter started by
    its full path (IDEs, cron) without its environment activated must still find it.
    """
    bindir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    return {**seed.without(dict(os.environ)), "PATH": bindir + (os.pathsep + path if path else ""), **(extra or {})}


def nbgrader(args: list[str], cwd: Path, timeout_s: float, env: dict[str, str] | None = None,
             memory_limit_gib: float | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m nbgrader ARGS`` in ``cwd``; a timeout (return code 124), endless output
    (125) or its process tree using more than ``memory_limit_gib`` (137) stops it and is
    reported, never raised."""
    env = tool_env({"PYTHONUNBUFFERED": "1", "IPYTHONDIR": str(_ipython_dir(cwd)), **(env or {})})
    return run_watched([sys.executable, *SAFE_PATH, "-m", "nbgrader", *args], cwd=cwd, env=env, timeout_s=timeout_s,
                       memory_limit_bytes=memory_limit_gib * 2**30 if memory_limit_gib else None)


_BANNERS = ("Please see the", "There was an error processing", "Traceback (most recent call last)")


def cause(log: str) -> str:
    """The one line of an nbgrader log that says why it failed.

    The last line of the last traceback (``FileNotFoundError: ... 'alembic'``), not nbgrader's
    banner ("Please see the above traceback"); else the last ERROR line that is not a banner.
    """
    lines = [ln.rstrip() for ln in log.splitlines()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Traceback (most recent call last)"):
            for ln in lines[i + 1:]:
                if ln and not ln.startswith((" ", "\t")) and ":" in ln:
                    return ln.strip()[:300]
    errors = [ln.strip() for ln in lines if ("ERROR" in ln or "Error" in ln) and not any(b in ln for b in _BANNERS)]
    if errors:
        return errors[-1][:300]
    return (log.strip().splitlines() or ["no output"])[-1][:300]


def ensure_assignment(course: Path, assignment: str, timeout_s: float = 300) -> None:
    """Make sure nbgrader's gradebook knows ``assignment`` (autograde needs its source cells)."""
    db = course / "gradebook.db"
    if db.exists():
        with sqlite3.connect(db) as con:
            try:
                if con.execute("select 1 from assignment where name=?", (assignment,)).fetchone():
                    return
            except sqlite3.Error:
                pass
    proc = nbgrader(["generate_assignment", assignment, "--force"], course, timeout_s)
    if proc.returncode != 0:
        raise SetupError(f"nbgrader generate_assignment {assignment} failed: {cause(proc.stderr + proc.stdout)}")


def _notebooks(autograded: Path) -> list[dict]:
    """The autograded notebooks that parse as notebooks. The kernel ran in that folder and may
    have left anything named ``*.ipynb`` there (a broken file must not stop the cohort)."""
    out = []
    for path in sorted(autograded.glob("*.ipynb")):
        try:
            with open(path, "rb") if path.is_file() and not path.is_symlink() else open(os.devnull, "rb") as f:
                nb = json.loads(f.read(MAX_NOTEBOOK_BYTES + 1) or b"null")
        except (OSError, ValueError):
            nb = None
        if isinstance(nb, dict) and isinstance(nb.get("cells"), list) and all(isinstance(c, dict) for c in nb["cells"]):
            out.append(nb)
    return out


def _messages(autograded: Path) -> dict[str, str]:
    """grade_id -> one-line reason, from the error outputs of the autograded notebooks.

    Every graded cell has an entry (empty when it passed), in notebook order.
    """
    out: dict[str, str] = {}
    for nb in _notebooks(autograded):
        for cell in nb.get("cells", []):
            gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if gid is None:
                continue
            out.setdefault(gid, "")
            for o in cell.get("outputs", []):
                if o.get("output_type") == "error":
                    value = (o.get("evalue") or "").strip().splitlines()
                    text = value[0] if value else ""
                    out[gid] = text if o.get("ename") == "AssertionError" and text else f"{o.get('ename')}: {text}"
                elif o.get("output_type") == "stream" and o.get("name") == "stderr" and not out[gid]:
                    out[gid] = "the cell wrote to stderr: " + "".join(o.get("text", ""))[:120].strip()
    return out


def cell_errors(autograded: Path) -> list[str]:
    """``cell N (`first line`): Type: message`` for every ungraded code cell that raised.

    Not part of the score; it often says why a later check failed (a function never
    defined because its cell raised), and a lesson's own demonstration cells must not raise.
    """
    out = []
    for nb in _notebooks(autograded):
        cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
        for i, cell in enumerate(cells, 1):
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade"):
                continue
            for o in cell.get("outputs", []):
                if o.get("output_type") == "error":
                    first = next((ln for ln in "".join(cell.get("source", "")).splitlines() if ln.strip()), "")
                    out.append(f"code cell {i} (`{first[:60]}`): {o.get('ename')}: {_error_value(o)[:200]}")
    return out


def _error_value(output: dict) -> str:
    """An error output's message in one line: its first, or for a Ray task's error (whose
    first line is Ray's header, the failing task and its pid) the cause's, which comes last."""
    from ...kernel.harness import uncoloured

    lines = [ln for ln in uncoloured(output.get("evalue") or "").splitlines() if ln.strip()]
    if not lines:
        return ""
    return lines[-1].strip() if str(output.get("ename", "")).startswith("RayTaskError") else lines[0].strip()


def static_findings(course: Path, assignment: str, student: str) -> list[str]:
    """The static check of the submitted notebook (:mod:`autograder.static_check`), read
    against the instructor's notebook so that edited cell metadata hides nothing."""
    from ... import static_check

    submitted = course / "submitted" / student / assignment
    source = next((p for d in ("solutions", "source") for p in [course / d / assignment / f"{assignment}.ipynb"]
                   if p.exists()), None)
    out = []
    for nb in sorted(submitted.glob("*.ipynb")):
        out += [str(f) for f in static_check.check_notebook(nb, source=source)]
    return out


def answered(course: Path, assignment: str, student: str) -> bool:
    """Whether the submission answered anything: an answer cell (nbgrader's ``solution`` cells)
    whose source is not the released notebook's. Only decides what the grader starts ahead
    (:meth:`Session.start`), never a score; True where it cannot tell."""
    import nbformat

    def answers(path: Path) -> list[str]:
        nb = nbformat.read(path, as_version=4)
        return [c.source for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution")]

    released = course / "labs" / assignment / f"{assignment}.ipynb"
    try:
        blank = answers(released)
        return any(answers(nb) != blank for nb in (course / "submitted" / student / assignment).glob("*.ipynb"))
    except (OSError, ValueError, AttributeError):
        return True


def read_results(course: Path, assignment: str, student: str) -> list[Result]:
    """The gradebook's per-cell scores for one submission, with failure messages."""
    from nbgrader.api import Gradebook, MissingEntry

    messages = _messages(course / "autograded" / student / assignment)
    results = []
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            return []
        order = {gid: i for i, gid in enumerate(messages)}
        for notebook in submission.notebooks:
            for g in sorted(notebook.grades, key=lambda g: order.get(g.name, len(order))):
                if g.auto_score is None and g.manual_score is None and g.cell_type != "code":
                    continue
                name = g.name[5:] if g.name.startswith("test-") else g.name
                score = float(g.score or 0.0)
                msg = "" if score >= g.max_score else messages.get(g.name, "")
                results.append(Result(name, score, float(g.max_score), msg))
    return results


def merge(kernel: list[Result], grader: list[Result]) -> tuple[list[Result], list[str]]:
    """Exactly the grader's checks, with its verdicts; and the checks the kernel over-reported.

    Rows the kernel reported for anything else (a graded cell it added to the gradebook)
    are dropped: the report lists the lab's checks and nothing more.
    """
    claimed = {r.name: r.score for r in kernel}
    return list(grader), [r.name for r in grader if claimed.get(r.name, 0.0) > r.score]


def _seed_env(student: str) -> dict[str, str]:
    """A fixed ``AUTOGRADER_SEED`` made per-student, and kept away from the kernel.

    The grader reads it from its own environment; the kernel's environment gets an empty one,
    so learner code cannot replay the grader's draws, and no two students share workloads.
    """
    base = seed.base()
    if not base:
        return {}
    digest = hashlib.sha256(f"{base}/{student}".encode()).digest()
    return {"seed": str(int.from_bytes(digest[:4], "big") % 2**31)}


def _sandbox_args(work: Path, course: Path, session, endpoint, group) -> tuple[list[str], dict[str, str]]:
    """nbgrader's extra arguments and environment that start the kernel in its sandbox.

    The kernel speaks to nbgrader over Unix sockets (ZeroMQ's ``ipc`` transport) in a folder
    of its own, so it needs no network; a Ray lab's kernel shares the loopback of its Ray's
    sandbox and no other (:mod:`autograder.grader.session.kernel_launcher`).
    """
    from ..session import kernel_launcher
    from ..isolation import sandbox

    spec = learner_spec(work, session, group)
    spec["readable"].append(endpoint.address)
    uid = int(spec.get("uid", sandbox.LEARNER_UID))
    sockets = work / "kernel"
    sockets.mkdir()
    ipython = _ipython_dir(work / "ipython")  # its own copy: IPython wants to write there
    sandbox.give(sockets, uid)
    sandbox.give(work / "ipython", uid)
    spec["writable"] += [str(sockets), str(work / "ipython")]
    spec["env"]["IPYTHONDIR"] = str(ipython)
    env = kernel_launcher.install(work, spec)
    (work / "runtime").mkdir(mode=0o755)  # the kernel's connection file, where its sandbox sees it
    sandbox.give(work / "runtime", uid)  # ipykernel makes its folder 0700
    return ["--KernelManager.transport=ipc", f"--KernelManager.ip={sockets / 'kernel'}"], env


def learner_spec(work: Path, session, group) -> dict:
    """What a learner's sandbox is made of for this grading (:func:`kernel_launcher.box`): the
    Python install and the kit read-only, the reference hidden, for a Ray lab the namespaces of
    that lab's Ray sandbox, and its control group ``group``."""
    from ..isolation import sandbox, syscalls

    kit, hidden = sandbox.kit_paths(reference=False)
    spec = {"readable": [*sandbox.python_paths(), *kit],
            "hidden": list(hidden), "writable": [],
            "etc": sandbox.etc_files(work / "etc"), "env": {},
            "join": str(session.ray_network) if session.ray_network else None,
            # a kernel of its own has no network: a cluster the learner named (RAY_ADDRESS and
            # its token) is out of its reach, so it starts a local Ray inside the sandbox
            "unset": [] if session.ray_network else list(CLUSTER_VARIABLES),
            "cgroup": list(group.learner_procs) if group else [], "seccomp": syscalls.filter_file()}
    if session.ray_network:
        # The kernel drives the lab's Ray as that Ray's own user: Ray's session files are written
        # by both, and learner actors already run as that user inside that Ray's sandbox.
        spec.update(uid=sandbox.GRADER_RAY_UID)
    return spec


def control_group(lab: str, memory_limit_gib: float | None, cpus: tuple[int, ...] = ()):
    """The submission's control group (:mod:`autograder.grader.isolation.cgroup`): its sandboxes' memory,
    tmpfs included, under ``memory_limit_gib``, their processes and threads under the
    sandbox's cap, and (in a grading slot) their cores to ``cpus``, with a freezer group for the
    learner's side (paused while the reference's turns are timed); ``None`` where this machine
    lets the grader make none."""
    from ...labs import needs_ray
    from ..isolation import cgroup, sandbox

    processes = sandbox.Limits().processes if needs_ray(lab) else sandbox.KERNEL_PROCESSES
    memory = int(memory_limit_gib * 2**30) if memory_limit_gib else None
    return cgroup.create(memory_bytes=memory, processes=processes, cpus=cpus, pausable=True)


def autograde(course: Path, assignment: str, student: str, limits: Limits, *,
              cpus: tuple[int, ...] = (), neighbours=None) -> Outcome:
    """Grade one submission with real ``nbgrader autograde`` and return its outcome.

    ``limits``: its timeouts, its memory cap, and whether the kernel, and for a Ray lab the lab's
    Ray, run in OS sandboxes (:mod:`autograder.grader.isolation.sandbox`; the caller has checked that one
    can be made).
    ``cpus``: the cores of the grading slot this runs in (:mod:`autograder.grader.engine.slots`): the
    sandboxes' control group holds them there. ``neighbours``: the other slots of that machine
    (:class:`autograder.grader.isolation.neighbours.Neighbours`), held while a tier they may have cost is
    measured again.
    """
    importlib.import_module("nbgrader.api")  # loaded before any learner code runs on this machine

    from ...kernel.channel import Endpoint
    from ..isolation.sandbox import SANDBOX_GID
    from ..session.session import Session

    cell_timeout_s, timeout_s = limits.cell_timeout_s, limits.timeout_s
    memory_limit_gib, sandboxed = limits.memory_limit_gib, limits.sandboxed
    started = time.monotonic()
    findings = static_findings(course, assignment, student)  # before anything of it runs
    seed = _seed_env(student).get("seed")
    session = Session(assignment, seed=int(seed) if seed else None)
    session.neighbours = neighbours
    endpoint = Endpoint(session.serve, gid=SANDBOX_GID if sandboxed else None)
    leftovers = Leftovers()
    space = workspace.make() if sandboxed else None  # everything its sandboxes may write, size-capped
    work = space.path if space is not None else None
    group = control_group(session.lab, memory_limit_gib, cpus) if sandboxed else None
    peak = 0
    try:
        try:
            share = () if work is None else (endpoint.address,)  # what a Ray lab's kernel needs there too
            env = {**endpoint.env, **session.start(sandbox_dir=work, share=share, group=group,  # no AUTOGRADER_SEED here
                                                   ahead=answered(course, assignment, student))}
        except Exception as exc:  # the grader's own machinery (its Ray) failed: say so, grade nothing
            return Outcome(student, assignment, error=f"the grader could not start its reference process "
                           f"({type(exc).__name__}: {str(exc)[:300]}); nothing was graded", retry=True,
                           findings=findings)
        limits = {"AUTOGRADER_CELL_TIMEOUT_S": str(int(cell_timeout_s)),
                  "AUTOGRADER_SUBMISSION_TIMEOUT_S": str(int(timeout_s))}
        extra: list[str] = []
        if work is not None:
            extra, more = _sandbox_args(work, course, session, endpoint, group)
            env.update(more)
        ran = time.monotonic()
        proc = nbgrader(["autograde", assignment, "--student", student, "--force",
                         f"--Execute.timeout={int(cell_timeout_s)}", CONFIG_ARG, *extra],
                        course, timeout_s, env={**env, **limits}, memory_limit_gib=memory_limit_gib)
    finally:
        ended = time.monotonic()
        session.close()  # the reference process and the lab's Ray, before the leftovers are counted
        if group is not None:  # whatever of the sandboxes is left, before anything is read back
            out_of_memory, peak, reaped = group.oom_kills() > 0, group.peak_bytes(), group.close()
        killed = leftovers.end()  # before anything is read back: nothing of it runs on
        endpoint.close()
        if space is not None:
            space.close()
    verdicts = session.seal()
    closed = time.monotonic()
    stopped = proc.returncode in (124, 125, 137)  # by the grader: what the kernel wrote is incomplete
    results = read_results(course, assignment, student) if not stopped else []
    log = (proc.stderr or "") + (proc.stdout or "") + "".join(
        f"\n[autograder | grader error]\n{f}" for f in endpoint.failures)
    log += "".join(f"\n[autograder | killed after the submission] {c}" for c in killed)
    if group is not None:
        log += (f"\n[autograder | control group] peak memory {peak / 2**30:.2f} GiB (tmpfs included), "
                f"OOM kills: {'yes' if out_of_memory else 'none'}, processes left and killed: {reaped}")
    if space is not None:
        log += (f"\n[autograder | work folder] peak {space.peak_bytes / 2**20:.0f} MiB written"
                + (f" of its {workspace.CAP_BYTES / 2**30:g} GiB cap" if space.capped else " (not capped here)"))
    log += "".join(f"\n[autograder | neighbours] {n}" for n in session.held_notes)
    raised = cell_errors(course / "autograded" / student / assignment)
    log += "".join(f"\n[autograder | an ungraded cell raised] {e}" for e in raised)
    log += "".join(f"\n[autograder | static check] {f}" for f in findings)
    error = ""
    if proc.returncode == 124:
        error = f"grading stopped after {timeout_s:g} s (the submission hung)"
    elif proc.returncode == 137 or (group is not None and out_of_memory):
        error = f"the submission used more than {memory_limit_gib:g} GiB of memory; it was stopped"
    elif proc.returncode == 125:
        error = f"the submission {proc.stderr.strip().splitlines()[-1]}; it was stopped"
    elif proc.returncode != 0 or not results:
        reason = "the kernel died" if "DeadKernel" in log or "kernel died" in log.lower() else cause(log)
        error = f"nbgrader autograde failed: {reason}"
    graded, flags = merge(results, verdicts)  # the grader's, however the kernel's run ended
    phases = {"set-up": ran - started, "nbgrader": ended - ran, "clean-up": closed - ended,
              "results": time.monotonic() - closed}
    log += "\n[autograder | phases] " + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items())
    return Outcome(student, assignment, graded, error=error, flags=flags, log=log, killed=not_ray(killed),
                   phases={k: round(v, 2) for k, v in phases.items()},
                   cell_errors=raised, findings=findings, seconds=time.monotonic() - started, sandboxed=sandboxed,
                   peak_memory_bytes=peak, peak_disk_bytes=space.peak_bytes if space is not None else 0)
