"""An operating-system sandbox for every process learner code runs or starts.

Built from Debian's ``bubblewrap`` (``bwrap``) and util-linux's ``setpriv`` and ``prlimit``,
run as root by the grader:

* **its own user**: the sandbox drops to an unprivileged uid of its own (no capabilities, no
  new privileges), so the kernel's file permissions, signals and ``ptrace`` rules apply to
  it as to any other user;
* **its own namespaces**: PID (it sees only its own processes, and they all end with it),
  IPC, UTS, and a mount namespace whose root holds only the system, the Python install, the
  kit's runtime packages (read-only, without the reference implementations) and the folder
  it may write;
* **private, size-capped** ``/tmp``, ``/dev/shm`` and home, thrown away with it;
* **no network** but a loopback of its own -- or, for a lab whose Ray the grader starts, the
  loopback of that Ray's sandbox and nothing else;
* **caps** on processes, file size, core dumps and CPU time (``prlimit``), besides the memory
  and wall-clock limits the grader already enforces on the whole tree.

Why bubblewrap: it is a small, audited setuid-free tool packaged by Debian, starts in
milliseconds (a container runtime adds seconds per kernel and a daemon), and works where
the grader runs as root in a machine or container of its own; Flatpak builds on it.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from . import syscalls

KIT_ROOT = Path(__file__).resolve().parents[3]
LEARNER_UID = 61000      # the uid learner code runs as (no entry in the host's /etc/passwd)
GRADER_RAY_UID = 61001   # the uid of a lab's Ray and the process that starts it, when they run sandboxed
REFERENCE_UID = 61002    # the uid of a reference process with a Ray of its own (a lab's spec: reference_ray)
SANDBOX_GID = 61000      # shared by both, so a kernel can reach its lab's Ray session files
HOME = "/home/learner"
TOOLS = ("bwrap", "setpriv", "prlimit")

SECCOMP_FD = 9  # where the sandbox's launch shell opens the filter for bubblewrap: see passable()
# a kernel with a Ray of its own counts its own Ray's threads (lab 03's: 16 GPUs' worth of actors)
KERNEL_PROCESSES = 3072


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use (PrairieLearn's external grader: 1,024 processes, 1 GiB disk)."""

    processes: int = 8192            # its cgroup's pids.max (else RLIMIT_NPROC of its uid). Linux counts
                                     # threads too, and one Ray worker has dozens (lab 02's kernel
                                     # died at 1,024 under its chaos run)
    file_bytes: int = 2 * 2**30      # RLIMIT_FSIZE: no single file larger
    cpu_seconds: int = 3600          # RLIMIT_CPU per process: a spinning process is killed
    tmp_bytes: int = 2 * 2**30       # /tmp and the home, each (tmpfs: memory, thrown away)
    shm_bytes: int = 4 * 2**30       # /dev/shm (Ray's object store lives here)


@dataclass(frozen=True)
class Sandbox:
    """One sandboxed command line: who it runs as, what it sees, what it may write.

    ``writable`` folders are bound read-write at their own paths (the caller makes them the
    sandbox user's); ``readable`` ones read-only; ``hidden`` ones are covered by an empty
    folder. ``join`` is ``None`` for namespaces of its own, or the pid of a process in a lab's
    Ray sandbox whose mount, PID and network namespaces this one enters (its /tmp included).
    """

    uid: int = LEARNER_UID
    gid: int = SANDBOX_GID
    writable: tuple[str, ...] = ()
    readable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    join: str | None = None
    binds: tuple[tuple[str, str], ...] = ()  # (host folder, path inside), read-write, over the private /tmp
    private: tuple[str, ...] = ()  # more empty, size-capped folders of its own (a kernel's working folder)
    exec_only: tuple[str, ...] = ()  # programs shown executable but not readable (:func:`exec_only_copy`)
    env: dict[str, str] = field(default_factory=dict)
    unset: tuple[str, ...] = ()  # variables of the grader's environment the sandbox must not see
    limits: Limits = Limits()
    etc: str = ""  # a folder holding the passwd and group files shown inside (see :func:`etc_files`)
    cgroup: tuple[str, ...] = ()  # the cgroup.procs files of its control group (:mod:`.cgroup`), if any
    seccomp: str | None = field(default_factory=lambda: syscalls.filter_file())  # the compiled filter (:mod:`.syscalls`)

    def argv(self, command: list[str], *, cwd: str | None = None, info_fd: int | None = None) -> list[str]:
        """The full command line that runs ``command`` inside this sandbox."""
        # Joining a lab's Ray sandbox (its mount, PID and network namespaces): the kernel sees
        # that Ray's processes with the pids its actors report (lab 02 kills them by pid), its
        # /tmp (files a kernel hands its actors by path) and its loopback -- nothing of the machine.
        prefix = ["nsenter", f"--target={self.join}", "--mount", "--pid", "--net", "--"] if self.join else []
        # first, as root in the grader's namespaces: join the control group (so that everything
        # started after it is counted there) and open the seccomp filter for bubblewrap to load
        steps = [f"echo $$ > {shlex.quote(f)}" for f in self.cgroup]
        opened = f" {SECCOMP_FD}<{shlex.quote(self.seccomp)}" if self.seccomp else ""
        if steps or opened:
            prefix = ["/bin/sh", "-c", " && ".join([*steps, f'exec "$@"{opened}']), "sandbox", *prefix]
        args = [shutil.which("bwrap") or "bwrap", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--die-with-parent", "--new-session"]
        if self.join is None:
            args += ["--unshare-pid", "--unshare-net"]
        if info_fd is not None:
            args += ["--info-fd", str(info_fd)]
        if self.seccomp:
            args += ["--seccomp", str(SECCOMP_FD)]
        args += _system_binds()
        if self.etc:
            args += ["--ro-bind", f"{self.etc}/passwd", "/etc/passwd", "--ro-bind", f"{self.etc}/group", "/etc/group"]
        lim = self.limits
        args += ["--proc", "/proc", "--dev", "/dev"]
        if self.join:  # the Ray sandbox's own, shared with its actors
            args += ["--bind", "/tmp", "/tmp", "--bind", "/dev/shm", "/dev/shm"]
        else:
            args += ["--size", str(lim.tmp_bytes), "--perms", "1777", "--tmpfs", "/tmp",
                     "--size", str(lim.shm_bytes), "--perms", "1777", "--tmpfs", "/dev/shm"]
        args += [*_parents(HOME), "--size", str(lim.tmp_bytes), "--perms", "0700", "--tmpfs", HOME]
        mounts = [(p, "--ro-bind") for p in self.readable] + [(p, "--bind") for p in self.writable]
        for path, _ in mounts:
            args += _parents(path)
        for path, how in sorted(mounts, key=lambda m: len(Path(m[0]).parts)):
            args += [how, path, path]
        for path in self.hidden:
            args += ["--perms", "0755", "--tmpfs", path]
        for path in self.exec_only:
            args += ["--ro-bind", exec_only_copy(path), path]
        for source, inside in self.binds:  # e.g. a lab's Ray session files at /tmp/ray
            args += [*_parents(inside), "--bind", source, inside]
        for path in self.private:
            args += [*_parents(path), "--size", str(lim.tmp_bytes), "--perms", "0700", "--tmpfs", path]
        env = {"HOME": HOME, "USER": "learner", "LOGNAME": "learner", "TMPDIR": "/tmp",
               "XDG_CACHE_HOME": f"{HOME}/.cache", "XDG_CONFIG_HOME": f"{HOME}/.config",
               "MPLCONFIGDIR": f"{HOME}/.config/matplotlib", **self.env}
        for key, value in env.items():
            args += ["--setenv", key, value]
        # a pid of the grader's namespace means nothing here (ipykernel would take its parent for
        # dead and exit); --die-with-parent ends the sandbox with its parent instead
        for key in ("JPY_PARENT_PID", *self.unset):
            args += ["--unsetenv", key]
        if cwd:
            args += ["--chdir", cwd]
        # Still root inside: make the home the sandbox user's, then drop to that user for good.
        # a control group caps the processes of this sandbox alone; RLIMIT_NPROC would count
        # every process of the uid on the machine, other sandboxes' included
        nproc = [] if self.cgroup else [f"--nproc={lim.processes}"]
        drop = ["prlimit", *nproc, f"--fsize={lim.file_bytes}", "--core=0",
                f"--cpu={lim.cpu_seconds}", "--",
                "setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        owned = " ".join(shlex.quote(p) for p in (HOME, *self.private))
        init = f'chown {self.uid}:{self.gid} {owned} && umask 007 && exec "$@"'
        return [*prefix, *args, "/bin/sh", "-c", init, "sandbox", *drop, *command]


def _system_binds() -> list[str]:
    """The system, read-only: ``/usr`` and ``/etc``, Debian's merged-/usr links as links."""
    args = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for name in ("bin", "lib", "lib32", "lib64", "libx32", "sbin"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _parents(path: str) -> list[str]:
    """Folders above ``path``, made traversable (bubblewrap would copy /root's 0700)."""
    out = []
    parts = Path(path).parts
    for i in range(2, len(parts)):
        out += ["--perms", "0755", "--dir", str(Path(*parts[:i]))]
    return out


def python_paths() -> tuple[str, ...]:
    """What a Python process of this install reads: its prefixes and every ``sys.path`` folder
    outside them (an editable install's source), the kit's folder itself excepted."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)}  # a venv may live anywhere, /tmp too
    found = {os.path.realpath(p) for p in sys.path if p and Path(p).is_dir()}
    kit = str(KIT_ROOT)
    keep = sorted(prefixes | {p for p in found if p != kit and not p.startswith("/tmp")})
    out: list[str] = []
    for p in keep:  # drop folders inside one already kept
        if not any(p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return tuple(out)


def passable(fd: int) -> int:
    """``fd`` moved above :data:`SECCOMP_FD`, for a file descriptor handed into a sandbox.

    The launch shell opens the seccomp filter on :data:`SECCOMP_FD`, replacing whatever the
    process had there: a descriptor that happened to land on that number (which depends on how
    many the grader has open) would be lost, and the sandboxed process fail to start.
    """
    import fcntl

    if fd > SECCOMP_FD:
        return fd
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, SECCOMP_FD + 1)
    os.close(fd)
    return moved


def kit_paths(*, reference: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The kit's runtime packages to show (read-only), and what to hide inside them: each lab's
    reference implementations (its ``reference`` folder, compiled copies included), unless the
    process is the grader's reference process."""
    readable = tuple(str(KIT_ROOT / name) for name in ("course", "autograder"))
    hidden = () if reference else tuple(sorted(str(p) for p in (KIT_ROOT / "autograder" / "labs").glob("lab*/reference")
                                               if p.is_dir()))
    return readable, hidden


def ray_daemons() -> tuple[str, ...]:
    """The installed Ray's own programs: the GCS server and the raylet (empty without Ray)."""
    import importlib.util

    spec = importlib.util.find_spec("ray")
    if spec is None or not spec.origin:
        return ()
    core = Path(spec.origin).parent / "core" / "src" / "ray"
    return tuple(str(p) for p in (core / "gcs" / "gcs_server", core / "raylet" / "raylet") if p.is_file())


@functools.lru_cache(maxsize=None)
def exec_only_copy(path: str) -> str:
    """A root-owned copy of the program ``path`` that a sandbox user may run but not read.

    Linux makes a process that runs a program it cannot read *not dumpable* (``execve(2)``,
    ``PR_SET_DUMPABLE``): its ``/proc/<pid>/environ``, ``mem`` and ``fd`` are then root's, so a
    process of the same uid cannot read them or write its memory. A lab's Ray sandbox shows
    the GCS server and the raylet this way: learner actors run as their uid (see
    :class:`Sandbox` and the sandbox page) and must not be able to rewrite Ray's records.
    """
    folder = Path(tempfile.mkdtemp(prefix="autograder-exec-only-"))
    atexit.register(shutil.rmtree, folder, True)
    copy = folder / Path(path).name
    shutil.copyfile(path, copy)
    os.chmod(copy, 0o711)
    return str(copy)


def etc_files(folder: Path) -> str:
    """Write the passwd and group files a sandbox shows: root and its own two users only, so
    that libraries asking who they run as (Ray, getpass) get an answer."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "passwd").write_text(f"root:x:0:0:root:/root:/bin/sh\n"
                                   f"learner:x:{LEARNER_UID}:{SANDBOX_GID}:learner:{HOME}:/bin/sh\n"
                                   f"graderray:x:{GRADER_RAY_UID}:{SANDBOX_GID}:grader's Ray:{HOME}:/bin/sh\n"
                                   f"reference:x:{REFERENCE_UID}:{SANDBOX_GID}:grader's reference:{HOME}:/bin/sh\n")
    (folder / "group").write_text(f"root:x:0:\nlearner:x:{SANDBOX_GID}:\n")
    for name in ("passwd", "group"):
        os.chmod(folder / name, 0o644)
    os.chmod(folder, 0o755)
    return str(folder)


def give(path: Path, uid: int = LEARNER_UID, gid: int = SANDBOX_GID) -> None:
    """Make ``path`` and everything under it the sandbox user's (links are not followed)."""
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), uid, gid)
    os.lchown(path, uid, gid)


@functools.lru_cache(maxsize=1)
def unavailable() -> str:
    """Why no sandbox can be made here ('' when one can): a missing tool, not root, or a
    trial sandbox that failed (a kernel without user or PID namespaces)."""
    if not sys.platform.startswith("linux"):
        return "the sandbox needs Linux namespaces"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} not found (Debian: apt-get install bubblewrap util-linux)"
    if os.geteuid() != 0:
        return "the sandbox switches to users of its own: run the grader as root (in its own machine or container)"
    with tempfile.TemporaryDirectory(prefix="autograder-sandbox-") as tmp:
        box = Sandbox(readable=python_paths(), etc=etc_files(Path(tmp) / "etc"))
        probe = "import os; print(os.getuid(), len([p for p in os.listdir('/proc') if p.isdigit()]))"
        try:
            out = subprocess.run(box.argv([sys.executable, "-I", "-c", probe]), capture_output=True, text=True,
                                 timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"a trial sandbox failed: {exc}"
        if out.returncode != 0 or out.stdout.split()[:1] != [str(LEARNER_UID)]:
            return f"a trial sandbox failed: {(out.stderr or out.stdout).strip()[-300:]}"
    return ""


def info_child(path: Path) -> int | None:
    """The sandboxed process's pid (host view) from bubblewrap's ``--info-fd`` output."""
    try:
        return int(json.loads(path.read_text())["child-pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
