"""The OS sandbox learner code runs in (autograder/grader/isolation/sandbox.py), tried directly.

A probe runs inside a sandbox and tries what a hostile submission would: the grader's
processes, its files and home, the kit, the network, the caps. Each try must fail, and
nothing it does may outlive it. (The same sandbox under real gradings: tests/test_labs.py
grades every lab in it; tests/test_sandbox_attacks.py grades hostile notebooks.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autograder.grader.isolation import processes, sandbox

ROOT = Path(__file__).resolve().parents[1]


def _require():
    why = sandbox.unavailable()
    if why:
        if os.environ.get("COURSE_KIT_REQUIRE_SANDBOX"):
            pytest.fail(f"COURSE_KIT_REQUIRE_SANDBOX is set, but no sandbox can be made: {why}")
        pytest.skip(f"no sandbox here: {why}")


# a probe's one helper: run fn, record "done" or the errno's name under name in out
ATTEMPT = textwrap.dedent('''
    def attempt(name, fn):
        try:
            fn()
            out[name] = "done"
        except OSError as exc:
            out[name] = errno.errorcode.get(exc.errno, str(exc.errno))
''')

PROBE = textwrap.dedent('''
    import errno, json, os, signal, socket, sys
    out = {"uid": os.getuid(), "gid": os.getgid()}
    args = json.loads(sys.argv[1])
''') + ATTEMPT + textwrap.dedent('''
    out["pids_seen"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    attempt("signal_grader", lambda: os.kill(args["canary_pid"], signal.SIGTERM))
    # the syscall filter, tried on a child of its own (a stand-in for a grader's Ray worker that
    # shares its uid in a Ray lab): stop, renice, pin, trace are refused; kill and nice() are not
    import ctypes
    child = os.fork()
    if child == 0:
        signal.pause()
        os._exit(0)
    attempt("stop_child", lambda: os.kill(child, signal.SIGSTOP))
    attempt("renice_child", lambda: os.setpriority(os.PRIO_PROCESS, child, 10))
    attempt("idle_child", lambda: os.sched_setscheduler(child, os.SCHED_IDLE, os.sched_param(0)))
    attempt("pin_self_thread", lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)))
    attempt("pin_child", lambda: os.sched_setaffinity(child, {min(os.sched_getaffinity(0))}))
    libc = ctypes.CDLL(None, use_errno=True)
    def trace():
        if libc.ptrace(16, child, None, None) != 0:  # PTRACE_ATTACH
            raise OSError(ctypes.get_errno(), "ptrace")
    attempt("trace_child", trace)
    attempt("nice_self", lambda: os.nice(1))
    attempt("kill_child", lambda: os.kill(child, signal.SIGKILL))
    os.waitpid(child, 0)
    attempt("read_grader_environ", lambda: open(f"/proc/{args['canary_pid']}/environ", "rb").read())
    attempt("write_kit", lambda: open(args["kit_file"], "a").write("# planted"))
    attempt("read_secret", lambda: open(args["secret"]).read())
    attempt("write_secret_dir", lambda: open(os.path.join(os.path.dirname(args["secret"]), "planted.py"), "w").write("x"))
    home = os.path.expanduser("~")
    out["home"] = home
    def startup():
        os.makedirs(home + "/.ipython/profile_default/startup", exist_ok=True)
        open(home + "/.ipython/profile_default/startup/00-planted.py", "w").write("print('planted')")
    attempt("write_home_startup", startup)
    attempt("write_tmp", lambda: open("/tmp/planted-by-learner", "w").write("x"))
    def fill_tmp():
        with open("/tmp/fill", "wb") as f:
            for _ in range(64):
                f.write(b"\\0" * 2**20)
    attempt("fill_tmp", fill_tmp)
    os.unlink("/tmp/fill") if os.path.exists("/tmp/fill") else None
    attempt("connect_host_listener", lambda: socket.create_connection(("127.0.0.1", args["port"]), timeout=2))
    attempt("connect_outside", lambda: socket.create_connection(("1.1.1.1", 53), timeout=2))
    def fork_bomb():
        kids = []
        try:
            for _ in range(200):
                pid = os.fork()
                if pid == 0:
                    signal.pause()
                    os._exit(0)
                kids.append(pid)
        finally:
            out["forked"] = len(kids)
            for pid in kids:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
    attempt("fork_bomb", fork_bomb)
    if os.fork() == 0:  # a daemon left behind: double fork, new session, sleeps on
        os.setsid()
        if os.fork() == 0:
            open("/tmp/daemon", "w").write(str(os.getpid()))
            os.execvp("sleep", ["sleep", "300"])
        os._exit(0)
    os.wait()
    print(json.dumps(out))
''')


def test_sandbox_takes_the_grader_s_powers_away(tmp_path):
    _require()
    # what the grader owns: a process (a canary standing in for the grader), a file only it
    # can read beside a module a later process would import, a listener on the host loopback
    canary = subprocess.Popen(["sleep", "300"], env={"SECRET": "the grader's"})
    secret_dir = tmp_path / "grader"
    secret_dir.mkdir(mode=0o700)
    (secret_dir / "secret.txt").write_text("seed=42")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    kit_file = ROOT / "course" / "__init__.py"
    before = kit_file.read_bytes()
    args = {"canary_pid": canary.pid, "kit_file": str(kit_file), "secret": str(secret_dir / "secret.txt"),
            "port": listener.getsockname()[1]}
    box = sandbox.Sandbox(readable=(*sandbox.python_paths(), *sandbox.kit_paths(reference=False)[0]),
                          etc=sandbox.etc_files(tmp_path / "etc"),
                          limits=sandbox.Limits(processes=64, tmp_bytes=16 * 2**20))
    try:
        out = subprocess.run(box.argv([sys.executable, "-I", "-c", PROBE, json.dumps(args)]),
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        got = json.loads(out.stdout.strip().splitlines()[-1])
        status = Path(f"/proc/{canary.pid}/status").read_text()
    finally:
        canary.kill()
        listener.close()
    assert (got["uid"], got["gid"]) == (sandbox.LEARNER_UID, sandbox.SANDBOX_GID)
    assert canary.pid not in got["pids_seen"] and len(got["pids_seen"]) < 10, got["pids_seen"]
    assert "State:\tS" in status  # the canary was not stopped
    assert got["signal_grader"] == "ESRCH" and got["read_grader_environ"] == "ENOENT"
    from autograder.grader.isolation import syscalls
    if not syscalls.unavailable() or os.environ.get("COURSE_KIT_REQUIRE_SANDBOX"):
        refused = ("stop_child", "renice_child", "idle_child", "pin_child", "trace_child")
        assert {k: got[k] for k in refused} == dict.fromkeys(refused, "EPERM"), (got, syscalls.unavailable())
        assert got["nice_self"] == got["kill_child"] == got["pin_self_thread"] == "done", got
    assert got["write_kit"] in ("EROFS", "EACCES") and kit_file.read_bytes() == before
    assert got["read_secret"] in ("ENOENT", "EACCES") and got["write_secret_dir"] in ("ENOENT", "EACCES", "EROFS")
    assert not (secret_dir / "planted.py").exists()
    assert got["write_home_startup"] == "done" and got["home"] == sandbox.HOME  # its own home, thrown away:
    assert not any(Path(p).expanduser().joinpath(".ipython/profile_default/startup/00-planted.py").exists()
                   for p in ("~", sandbox.HOME))
    assert got["write_tmp"] == "done" and not Path("/tmp/planted-by-learner").exists()
    assert got["fill_tmp"] == "ENOSPC"  # 16 MiB cap in this test
    assert got["connect_host_listener"] == "ECONNREFUSED"  # its own loopback: nothing listens there
    assert got["connect_outside"] in ("ENETUNREACH", "EHOSTUNREACH")
    assert got["fork_bomb"] == "EAGAIN" and got["forked"] < 64
    time.sleep(0.5)
    left = subprocess.run(["ps", "-o", "pid=", "-u", str(sandbox.LEARNER_UID)], capture_output=True, text=True).stdout
    assert not left.split(), f"processes of the sandbox user outlived it: {left}"


def test_a_program_shown_exec_only_runs_but_is_not_dumpable(tmp_path):
    """A lab's Ray sandbox shows the GCS server and the raylet this way (learner actors share
    their uid): another process of the uid can neither read the program nor its process's
    environment or memory -- nor, through the syscall filter, pin it to a CPU -- while the same
    program shown plainly can be read. Killing it stays possible (that costs only a grade)."""
    _require()
    sleep = os.path.realpath(shutil.which("sleep"))
    probe = "import errno, json, os, subprocess\nout = {}\n" + ATTEMPT + textwrap.dedent(f'''
        hidden = subprocess.Popen([{sleep!r}, "60"])
        plain = subprocess.Popen(["python3", "-c", "import time; time.sleep(60)"])
        import time; time.sleep(0.5)
        attempt("read_program", lambda: open({sleep!r}, "rb").read(16))
        for who, p in (("hidden", hidden), ("plain", plain)):
            attempt(who + "_environ", lambda: open(f"/proc/{{p.pid}}/environ", "rb").read())
            attempt(who + "_mem", lambda: open(f"/proc/{{p.pid}}/mem", "r+b").close())
            attempt(who + "_pin", lambda: os.sched_setaffinity(p.pid, os.sched_getaffinity(p.pid)))
            attempt(who + "_kill", lambda: (p.kill(), p.wait()))
        print(json.dumps(out))
    ''')
    box = sandbox.Sandbox(readable=sandbox.python_paths(), etc=sandbox.etc_files(tmp_path / "etc"),
                          exec_only=(sleep,))
    out = subprocess.run(box.argv([sys.executable, "-I", "-c", probe]), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["read_program"] == got["hidden_environ"] == got["hidden_mem"] == "EACCES", got
    assert got["plain_environ"] == got["plain_mem"] == "done", got
    assert got["hidden_kill"] == got["plain_kill"] == "done", got
    from autograder.grader.isolation import syscalls
    if not syscalls.unavailable() or os.environ.get("COURSE_KIT_REQUIRE_SANDBOX"):
        assert got["hidden_pin"] == got["plain_pin"] == "EPERM", got
    assert [Path(p).name for p in sandbox.ray_daemons()] == ["gcs_server", "raylet"]


def test_a_kernel_sees_no_reference_solutions():
    """The kit is shown read-only to a kernel, without any lab's reference folder."""
    _require()
    readable, hidden = sandbox.kit_paths(reference=False)
    assert sorted(Path(p).relative_to(ROOT).as_posix() for p in hidden) == [
        f"autograder/labs/{lab}/reference" for lab in ("lab00", "lab01", "lab02", "lab03", "lab04", "lab05")]
    assert not any(Path(p).name in ("solutions", "submitted", "autograded") for p in readable)
    assert sandbox.kit_paths(reference=True)[1] == ()


def test_grade_refuses_to_run_without_a_sandbox(tmp_path, monkeypatch, capsys):
    from autograder import cli

    (tmp_path / "nbgrader_config.py").write_text("")
    (tmp_path / "submitted" / "s1" / "00_measure").mkdir(parents=True)  # a course with a submission
    monkeypatch.setattr(sandbox, "unavailable", lambda: "bwrap not found")
    assert cli.main(["grade", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "none can be made here: bwrap not found" in err and "--unsandboxed" in err


def test_a_control_group_caps_memory_held_in_tmpfs_and_reaps_what_is_left(tmp_path):
    """Memory written to the sandbox's /dev/shm is in no process's resident set; the grading's
    control group counts it and stops the sandbox at its cap (OOM kill), and closing the group
    kills what is left (a daemon the sandbox started) and removes it. On a machine that lets the
    grader make no control group, the sandbox falls back to RLIMIT_NPROC and the memory watch."""
    from autograder.grader.isolation import cgroup

    _require()
    group = cgroup.create(memory_bytes=256 * 2**20, processes=64)
    if group is None:
        if os.environ.get("COURSE_KIT_REQUIRE_SANDBOX"):
            pytest.fail("COURSE_KIT_REQUIRE_SANDBOX is set, but this machine lets the grader make no control group")
        pytest.skip("this machine lets the grader make no control group")
    box = sandbox.Sandbox(readable=sandbox.python_paths(), etc=sandbox.etc_files(tmp_path / "etc"), cgroup=group.procs)
    try:
        fill = subprocess.run(box.argv(["/bin/sh", "-c", "dd if=/dev/zero of=/dev/shm/fill bs=1M count=400"]),
                              capture_output=True, text=True, timeout=60)
        assert fill.returncode != 0 and group.oom_kills() >= 1, (fill.returncode, fill.stderr[-300:])
        assert 200 * 2**20 < group.peak_bytes() <= 256 * 2**20
        daemon = box.argv(["/bin/sh", "-c", "setsid sleep 300 & sleep 300"])
        proc = subprocess.Popen(daemon, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while len(group.pids()) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        seen = group.pids()
        assert len(seen) >= 4  # bwrap (the join shell's exec), its child, the shell and its sleeps
    finally:
        killed = group.close()
    proc.wait(10)
    # how many kill() calls landed varies: a process whose namespace's first process died first is
    # already gone (a run on a loaded machine once counted 2 of 3); that none is left is what matters
    left = [pid for pid in seen if not processes._zombie(pid)]  # gone or a zombie: ended
    assert killed >= 1 and not left and not any(f.exists() for f in group.folders), (killed, left)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def test_the_learner_side_gets_no_cpu_while_paused_and_a_frozen_group_still_closes(tmp_path):
    """What side-by-side timing relies on (:meth:`Session.side_by_side`): a process that joined
    the group's learner side (as the kernel and the lab's Ray do) runs no instruction while the
    group is paused, and goes on after; one of the group's other side (the reference's sandbox)
    is not paused; and a grading stopped with its learner side frozen is still cleaned up."""
    from autograder.grader.isolation import cgroup

    _require()
    group = cgroup.create(memory_bytes=256 * 2**20, processes=64, pausable=True)
    if group is None or group.freezer is None:
        if os.environ.get("COURSE_KIT_REQUIRE_SANDBOX"):
            pytest.fail("COURSE_KIT_REQUIRE_SANDBOX is set, but this machine lets the grader make no freezer group")
        pytest.skip("this machine lets the grader make no freezer group")
    etc = sandbox.etc_files(tmp_path / "etc")
    spin = [sys.executable, "-c", "while True: pass"]
    learner = subprocess.Popen(sandbox.Sandbox(readable=sandbox.python_paths(), etc=etc,
                                               cgroup=group.learner_procs).argv(spin))
    reference = subprocess.Popen(sandbox.Sandbox(readable=sandbox.python_paths(), etc=etc,
                                                 cgroup=group.procs).argv(spin))
    try:
        deadline = time.monotonic() + 10
        while len(group.pids()) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        spinners = set(_spinners(group))
        frozen_side = {int(p) for p in (group.freezer / "cgroup.procs").read_text().split()}
        mine, theirs = spinners & frozen_side, spinners - frozen_side
        assert len(mine) == 1 and len(theirs) == 1, (spinners, frozen_side)
        (mine,), (theirs,) = mine, theirs
        with group.paused() as paused:
            assert paused
            before = _cpu_seconds(mine), _cpu_seconds(theirs)
            time.sleep(1.0)
            during = _cpu_seconds(mine) - before[0], _cpu_seconds(theirs) - before[1]
        assert during[0] <= 0.02 < 0.5 < during[1], during  # one tick of slack
        time.sleep(1.0)
        assert _cpu_seconds(mine) - before[0] > 0.5  # thawed: it runs again
        with group.paused():  # stopped mid-turn: close() thaws what it kills
            killed = group.close()
    finally:
        for proc in (learner, reference):
            proc.kill()
            proc.wait(10)
    assert killed >= 2 and not group.freezer.exists() and not any(f.exists() for f in group.folders)


def test_at_idle_priority_neither_side_can_take_the_cores_from_the_other(tmp_path):
    """What side-by-side timing relies on where the reference has a Ray of its own: the two sides
    sit in cpu groups of their own at the same weight, so that with as many spinners on each side as
    there are cores each gets about half the CPU (before, the reference's processes sat one by one
    in the root group against the learner's one group: 2:1 on 2 cores). With one side at idle
    priority (:meth:`Cgroup.idle`: the learner's in the reference's turns, the reference's in the
    learner's) its spinners get next to none and the other side's the cores; they run on after
    (nothing is frozen), and the learner side cannot raise its group's weight back itself."""
    from autograder.grader.isolation import cgroup

    _require()
    group = cgroup.create(memory_bytes=256 * 2**20, processes=64, pausable=True)
    if group is None or group.cpu is None or group.reference_cpu is None:
        if group is not None:
            group.close()
        if os.environ.get("COURSE_KIT_REQUIRE_SANDBOX"):
            pytest.fail("COURSE_KIT_REQUIRE_SANDBOX is set, but this machine lets the grader make no cpu group")
        pytest.skip("this machine lets the grader make no cpu group")
    etc = sandbox.etc_files(tmp_path / "etc")
    n = os.cpu_count() or 1
    # each spinner also tries to drop the idle flag of its group (a root-owned file; it must fail)
    spin = [sys.executable, "-c", "import glob\nfor f in glob.glob('/sys/fs/cgroup/cpu*/**/cpu.idle', recursive=True):\n"
            "    try: open(f, 'w').write('0')\n    except OSError: pass\nwhile True: pass"]
    procs = [subprocess.Popen(sandbox.Sandbox(readable=sandbox.python_paths(), etc=etc,
                                              cgroup=procs).argv(spin))
             for procs in [group.learner_procs] * n + [group.reference_procs] * n]
    try:
        deadline = time.monotonic() + 10
        while len(_spinners(group)) < 2 * n and time.monotonic() < deadline:
            time.sleep(0.05)
        learner_side = {int(p) for p in (group.cpu / "cgroup.procs").read_text().split()}
        reference_side = {int(p) for p in (group.reference_cpu / "cgroup.procs").read_text().split()}
        mine = [p for p in _spinners(group) if p in learner_side]
        theirs = [p for p in _spinners(group) if p in reference_side]
        assert len(mine) == n and len(theirs) == n, (mine, theirs)

        def shares(seconds: float = 1.0) -> tuple[float, float]:
            before = [sum(map(_cpu_seconds, side)) for side in (mine, theirs)]
            time.sleep(seconds)
            return tuple(sum(map(_cpu_seconds, side)) - b for side, b in zip((mine, theirs), before))

        fair = shares()
        with group.idle() as lowered:
            assert lowered
            learner_low = shares()
        with group.idle("reference") as lowered:
            assert lowered
            reference_low = shares()
        after = shares()
        assert 0.6 < fair[0] / fair[1] < 1 / 0.6, fair  # the same weight on both sides
        assert learner_low[0] < 0.05 * n and learner_low[1] > 0.9 * n, learner_low
        assert reference_low[1] < 0.05 * n and reference_low[0] > 0.9 * n, reference_low
        assert min(after) > 0.25 * n, after  # back at their weight: never stopped
    finally:
        group.close()
        for proc in procs:
            proc.kill()
            proc.wait(10)
    assert not any(f.exists() for f in (group.cpu, group.reference_cpu, *group.folders))


def _spinners(group) -> list[int]:
    return [p for p in group.pids() if Path(f"/proc/{p}/cmdline").read_bytes().startswith(sys.executable.encode())]


def test_a_cgroup_v2_learner_side_pauses_too(tmp_path):
    """The freeze's v2 path (``cgroup.freeze``, ``cgroup.events``), on a cgroup2 hierarchy mounted
    for this test (this kit's CI machines group by v1; a v2 hierarchy with no controllers still
    freezes): a spinner on the learner side gets no CPU time while paused, runs after, and a
    group closed while paused is removed with it (v2 lets a frozen process die)."""
    from autograder.grader.isolation import cgroup

    mount = tmp_path / "cgroup2"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "cgroup2", "none", str(mount)],
                                           capture_output=True).returncode:
        pytest.skip("no cgroup2 hierarchy can be mounted here")
    spinner = None
    try:
        folder = mount / f"autograder-v2-test-{os.getpid()}"  # the machine's one v2 hierarchy, mounted again
        folder.mkdir()
        (folder / "learner").mkdir()
        group = cgroup.Cgroup((folder,), None, folder / "learner")
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        (folder / "learner" / "cgroup.procs").write_text(str(spinner.pid))
        assert group.pids() == [spinner.pid]
        with group.paused() as paused:
            assert paused and "frozen 1" in (folder / "learner" / "cgroup.events").read_text()
            before = _cpu_seconds(spinner.pid)
            time.sleep(1.0)
            during = _cpu_seconds(spinner.pid) - before
        assert during <= 0.02, during
        deadline = time.monotonic() + 10
        while _cpu_seconds(spinner.pid) - before < 0.3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _cpu_seconds(spinner.pid) - before >= 0.3  # thawed: it runs again (on a busy machine too)
        with group.paused():
            killed = group.close()
        assert killed == 1 and spinner.wait(10) == -9 and not folder.exists()
    finally:
        if spinner is not None and spinner.poll() is None:
            spinner.kill()
            spinner.wait(10)
        subprocess.run(["umount", "-l", str(mount)], check=False)


FILL_THEN_START = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from autograder.grader.isolation import sandbox
    from autograder.grader.session.reference_process import ReferenceProcess
    first, held = sandbox.SECCOMP_FD - int(sys.argv[1]), []  # the lowest free number from here on
    for fd in range(first, sandbox.SECCOMP_FD + 4):
        try:
            os.close(fd)
        except OSError:
            pass
    while (fd := os.open(os.devnull, os.O_RDONLY)) < first:
        held.append(fd)
    os.close(fd)
    ReferenceProcess("00_measure", sandbox_dir=Path(sys.argv[2])).close()
    print("started")
""")


@pytest.mark.parametrize("free_below", range(6))  # so that each fd the reference process opens lands on 9 once
def test_a_descriptor_handed_in_on_the_filters_number_still_arrives(tmp_path, free_below):
    """The reference process gets two descriptors (bubblewrap's report, its code in a memory
    file); when the grader happens to have the numbers below the seccomp filter's open, one of
    them lands on the number the launch shell opens the filter on. Both are moved above it
    (:func:`sandbox.passable`), so the process still starts (seen: "could not start its
    reference process", depending on how many files the grader had open). The numbers are
    filled in a fresh process of its own, not this test runner's."""
    _require()
    os.chmod(tmp_path, 0o755)
    out = subprocess.run([sys.executable, "-c", FILL_THEN_START, str(free_below), str(tmp_path)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.stdout.strip() == "started", out.stderr[-1500:]
