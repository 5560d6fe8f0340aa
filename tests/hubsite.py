"""A real JupyterHub for the tests (tests/test_hub.py): JupyterHub from PyPI, configurable-http-proxy
from npm, students as real Unix users, nbgrader's exchange in a temp folder, and the grading
service as the hub's managed service -- the configuration in tests/hub/jupyterhub_config.py.

Everything it makes it removes: the hub (which stops its proxy, its service and the students'
servers), what the students' processes left running, the users and their homes, the
traversal rights it gave them, the folders.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from notebooks import ROOT

HUB_CONFIG = ROOT / "tests" / "hub" / "jupyterhub_config.py"
DRIVER_CONFIG = ROOT / "tests" / "hub" / "driver_config.py"
COURSE_ID = "kit101"
LAB = "00_measure"
REQUIRE = "COURSE_KIT_REQUIRE_HUB"  # .ci/run sets it: a missing piece fails the test instead of skipping it


def proxy_command() -> str | None:
    """configurable-http-proxy: ``$COURSE_KIT_CHP``, the copy .ci/run installs in build/chp, or PATH."""
    for candidate in (os.environ.get("COURSE_KIT_CHP"), ROOT / "build" / "chp" / "node_modules" / ".bin" /
                      "configurable-http-proxy", shutil.which("configurable-http-proxy")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    return None


def unavailable() -> str | None:
    """Why a hub cannot run here, or ``None``."""
    if os.geteuid() != 0:
        return "the hub test makes Unix users and runs students' servers as them: it needs root (CI runs as root)"
    try:
        import jupyterhub  # noqa: F401
    except ImportError:
        return "jupyterhub is not installed (the test extra)"
    if proxy_command() is None:
        return ("configurable-http-proxy is missing: `npm install --prefix build/chp configurable-http-proxy@4` "
                "(.ci/run does) or set COURSE_KIT_CHP")
    for tool in ("useradd", "userdel", "chpasswd", "runuser", "setfacl", "getfacl"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (Debian: passwd, util-linux, acl)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd: list[str], timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    """Run a command; raise with its output when it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({proc.returncode}): {(proc.stderr + proc.stdout)[-2000:]}")
    return proc


# -- Unix students --------------------------------------------------------------------------------------


def add_user(name: str, password: str) -> None:
    """A Unix user with a home and a password, as The Littlest JupyterHub makes one."""
    run(["useradd", "--create-home", "--shell", "/bin/bash", name])
    run(["chpasswd"], input=f"{name}:{password}\n")


def remove_user(name: str) -> None:
    """End what the user still runs (each process by its id), then remove the user and home."""
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    for pid in _pids_of(uid):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    subprocess.run(["userdel", "--remove", name], capture_output=True, timeout=60)


def _pids_of(uid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


class Traversal:
    """Students run the Python environment the hub runs (their servers are its
    ``jupyterhub-singleuser``): each folder above it that others may not traverse (a venv in a
    clone under /root, say) gets an ACL entry letting these users through -- search only, no
    listing -- taken back afterwards, each folder's ACL restored as it was."""

    def __init__(self, paths: list[Path]):
        self.folders = sorted({p for path in paths for p in Path(path).resolve().parents
                               if not os.stat(p).st_mode & 0o001})
        self.saved: dict[Path, str] = {}

    def grant(self, users: list[str]) -> None:
        for folder in self.folders:
            self.saved[folder] = run(["getfacl", "--absolute-names", str(folder)]).stdout
            for user in users:
                run(["setfacl", "-m", f"u:{user}:x", str(folder)])

    def restore(self) -> None:
        for folder, acl in self.saved.items():
            subprocess.run(["setfacl", "-b", str(folder)], capture_output=True)
            subprocess.run(["setfacl", "--restore=-"], input=acl, text=True, capture_output=True)


def check_student_can_run_python(user: str) -> None:
    """Fail with what to do when a student cannot run the hub's Python environment."""
    proc = subprocess.run(["runuser", "-u", user, "--", sys.executable, "-c",
                           "import jupyterhub, jupyterlab, nbgrader"], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"a student ({user}) cannot run {sys.executable} with JupyterHub, JupyterLab and nbgrader "
                           f"({proc.stderr.strip()[-500:]}): the environment's files must be readable by all "
                           "(a venv made with umask 077 is not); make it with umask 022")


# -- the hub ---------------------------------------------------------------------------------------------


@dataclass
class Hub:
    """A running hub: its URL, the test's admin token, the folders, the students' passwords."""

    url: str
    token: str
    base: Path
    course: Path
    exchange: Path
    students: dict[str, str]  # name -> password
    service_url: str
    proc: subprocess.Popen | None = None
    log: Path | None = None
    user_tokens: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # more COURSE_HUB_* settings for a driver config

    def api(self, method: str, path: str, body: dict | None = None, token: str | None = None,
            timeout: float = 60) -> dict | list | None:
        """A JSON request to the hub (``path`` under ``/hub/api``) or, for a path starting
        ``/user/``, to a student's server through the proxy."""
        url = self.url + (path if path.startswith("/user/") else f"/hub/api{path}")
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method,
                                     headers={"Authorization": f"token {token or self.token}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            text = resp.read().decode()
        return json.loads(text) if text.strip() else None

    def start_server(self, student: str, timeout_s: float = 120) -> str:
        """Start the student's JupyterLab through the hub; a token of theirs to reach it."""
        self.api("POST", f"/users/{student}/server")
        deadline = time.monotonic() + timeout_s
        while not (self.api("GET", f"/users/{student}") or {}).get("servers", {}).get("", {}).get("ready"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{student}'s server did not start in {timeout_s:.0f} s:\n{self.log_tail()}")
            time.sleep(0.5)
        token = self.api("POST", f"/users/{student}/tokens", {"note": "hub test", "expires_in": 3600})["token"]
        self.user_tokens[student] = token
        return token

    def as_student(self, student: str, method: str, path: str, body: dict | None = None, timeout: float = 300):
        """A request to ``/user/<student>/<path>`` with the student's own token."""
        return self.api(method, f"/user/{student}/{path}", body, token=self.user_tokens[student], timeout=timeout)

    def log_tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log and self.log.exists() else ""


def prepare(students: list[str], serve_options: str) -> Hub:
    """Folders, the course (lab 00 generated, the roster), the exchange, the students' config."""
    base = Path(tempfile.mkdtemp(prefix="course-kit-hub-", dir="/tmp"))
    base.chmod(0o755)
    from notebooks import make_course

    course = make_course(base / "course", [LAB])
    course.chmod(0o700)
    exchange = base / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)  # nbgrader's docs: the exchange root is writable by all
    settings = f"c.CourseDirectory.course_id = {COURSE_ID!r}\nc.Exchange.root = {str(exchange)!r}\n"
    with open(course / "nbgrader_config.py", "a") as f:
        f.write("\n" + settings)
    config = base / "student-config"
    config.mkdir(mode=0o755)
    (config / "nbgrader_config.py").write_text("c = get_config()\n" + settings)
    (config / "nbgrader_config.py").chmod(0o644)
    state = base / "state"
    state.mkdir(mode=0o700)
    passwords = {s: secrets.token_urlsafe(12) for s in students}
    return Hub(url=f"http://127.0.0.1:{free_port()}", token=secrets.token_hex(32), base=base, course=course,
               exchange=exchange, students=passwords, service_url=f"http://127.0.0.1:{free_port()}")


def nbgrader(course: Path, *args: str, timeout: float = 300) -> str:
    """The instructor's nbgrader command in the course folder."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, timeout=timeout).stdout


def start(hub: Hub, serve_options: str, driver: Path = DRIVER_CONFIG, timeout_s: float = 60) -> None:
    """Start JupyterHub with the test's configuration; wait for its API."""
    hub.log = hub.base / "state" / "jupyterhub.log"
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "COURSE_HUB_STATE": str(hub.base / "state"), "COURSE_HUB_URL": hub.url,
           "COURSE_HUB_API_URL": f"http://127.0.0.1:{free_port()}",
           "COURSE_HUB_PROXY_API_URL": f"http://127.0.0.1:{free_port()}", "COURSE_HUB_PROXY": proxy_command(),
           "COURSE_HUB_STUDENTS": " ".join(hub.students), "COURSE_HUB_STUDENT_CONFIG": str(hub.base / "student-config"),
           "COURSE_HUB_COURSE": str(hub.course), "COURSE_HUB_SERVICE_URL": hub.service_url,
           "COURSE_HUB_SERVE_OPTIONS": serve_options, "COURSE_HUB_TEST_TOKEN": hub.token, **hub.env}
    with open(hub.log, "w") as log:
        hub.proc = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(driver)],
                                    cwd=hub.base / "state", env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            hub.api("GET", "")
            return
        except (OSError, urllib.error.URLError):
            if hub.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"JupyterHub did not start:\n{hub.log_tail()}")
            time.sleep(0.5)


def stop(hub: Hub, timeout_s: float = 60) -> None:
    """Stop the hub: SIGTERM, and it stops its proxy, the services and the students' servers;
    then end whatever of them is left -- each process the hub had started (known by its id and
    start time, whatever its working folder, user or environment), and each that names the hub's
    folder -- and fail if any survives. (Seen 2026-12-07: the formgrader service, root, its
    working folder the deleted course, ran on an hour after the browser test.)"""
    family = _family(hub.proc.pid) if hub.proc is not None else {}
    if hub.proc is not None and hub.proc.poll() is None:
        hub.proc.terminate()
        try:
            hub.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            hub.proc.kill()
            hub.proc.wait(10)
    deadline = time.monotonic() + 10
    while left := _end_leftovers(hub, family):  # a hub that died at start leaves its proxy running
        if time.monotonic() > deadline:
            raise AssertionError(f"the hub's processes outlived it: {left}")
        time.sleep(0.2)


def _started(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or ``None`` if it is gone: with the pid, a
    process's identity (a pid alone may be another process's by now)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _family(pid: int) -> dict[int, int]:
    """pid -> start time of ``pid`` and each of its live descendants."""
    from autograder.grader.isolation.processes import descendants

    return {p: t for p in (pid, *descendants(pid)) if (t := _started(p)) is not None}


@contextlib.contextmanager
def running(students: list[str], serve_options: str, roster: list[str] | None = None,
            driver: Path = DRIVER_CONFIG, start_servers: bool = True, env: dict[str, str] | None = None):
    """A hub with these Unix students (made here, removed after), lab 00 generated and released,
    ``roster`` (default: every student) in the gradebook; each student's server started unless
    not ``start_servers``; ``env``: more settings for ``driver``. Skips (or fails under ``COURSE_KIT_REQUIRE_HUB=1``) where no hub can run."""
    import pytest

    why = unavailable()
    if why:
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"hub test required ({REQUIRE}=1) but {why}")
        pytest.skip(why)
    hub = prepare(students, serve_options)
    hub.env.update(env or {})
    traversal = Traversal([sys.prefix, os.path.realpath(sys.executable)])  # a venv, and its Python
    try:
        for name, password in hub.students.items():
            add_user(name, password)
        traversal.grant(list(hub.students))
        check_student_can_run_python(students[0])
        nbgrader(hub.course, "generate_assignment", LAB)
        for name in students if roster is None else roster:
            nbgrader(hub.course, "db", "student", "add", name)
        nbgrader(hub.course, "release_assignment", LAB)
        start(hub, serve_options, driver)
        if start_servers:
            for name in students:
                hub.start_server(name)
        yield hub
    finally:
        stop(hub)
        traversal.restore()
        for name in hub.students:
            remove_user(name)
        if os.environ.get("COURSE_KIT_KEEP_HUB") != "1":
            shutil.rmtree(hub.base, ignore_errors=True)


def _end_leftovers(hub: Hub, family: dict[int, int]) -> list[str]:
    """SIGKILL what the hub started and left: the processes of ``family`` (pid -> start time)
    still running, and those whose command line, environment or working folder names this hub's
    folder; their command lines (empty: none was left)."""
    from autograder.grader.isolation.processes import _command, _zombie

    mark = str(hub.base).encode()
    left = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid() or _zombie(int(entry.name)):
            continue
        pid = int(entry.name)
        try:
            ours = (family.get(pid) is not None and family[pid] == _started(pid)) or mark in (entry / "cmdline").read_bytes() \
                or mark in (entry / "environ").read_bytes() or os.readlink(entry / "cwd").startswith(str(hub.base))
            if ours:
                left.append(_command(pid))
                os.kill(pid, 9)
        except (OSError, ProcessLookupError):
            pass
    return left
