"""The lab's reference implementations in a process of their own, driven like a learner's kernel.

The grader runs no learner code and unpickles nothing learner code made; it does not run
the reference in its own process either, so that both sides are measured the same way:
requests over a channel (:mod:`autograder.kernel.channel`), carried out by the same kit code
(:mod:`autograder.kernel.agent`), timed by the grader's clock, interleaved.

For labs whose checks need Ray, a process of this program also *starts* a Ray (the fleet's
resources, :func:`course.fleet.start`, or the lab's ``ray_start`` step). The lab's Ray, which
the learner's kernel joins through ``RAY_ADDRESS``, holds the grader's instruments and the
learner's actors; graded sandboxed, that process runs the lab's kit steps only (``instruments``)
and the reference process starts a Ray of its own that no learner process reaches
(:meth:`Session.start <autograder.grader.session.session.Session.start>`). Each ends with the submission.

``calibrate`` also runs the reference, or its degraded copy, in such a process *sandboxed as a
learner's kernel is* (``learner=``): the learner's side of a calibration, measured as grading
measures a kernel.

Run as ``python -m autograder.grader.session.reference_process LAB [COPY]`` by :class:`ReferenceProcess` only.
"""

from __future__ import annotations

import importlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

from ... import labs
from ...kernel.channel import ENDPOINT_ENV, Endpoint, ProtocolError, recv, send
from ..isolation import processes, sandbox
from ..isolation.sandbox import SANDBOX_GID
from ..isolation.processes import SAFE_PATH
from .catalog import reference
from ...seed import without

START_TIMEOUT_S = 120.0
# Ray's settings in every Ray a process of this program starts: the lab's and the reference's own
# alike, so both sides of a timed comparison run under the same ones. Idle workers are kept 60 s,
# not Ray's 1 s (``idle_worker_killing_time_threshold_ms``): a round that needs more workers on one
# node than Ray keeps idle there otherwise had them killed between rounds and started again inside
# the next timed window -- 13-24 worker starts on lab 04's busiest node in bad runs, its learner's
# turn right after the reference's 1.62-1.65 s against 0.72-0.80 s after its own (2 cores;
# docs/measurement.md#same-conditions). Every grading's processes still count against its caps.
RAY_SETTINGS = (("RAY_idle_worker_killing_time_threshold_ms", "60000"),)
SOURCES_FD_ENV = "AUTOGRADER_REFERENCE_FD"  # a sandboxed process reads its reference code from this fd


class ReferenceProcess:
    """A running reference process for ``lab``; :attr:`remote` calls into it (a ``Learner``).

    ``ray=True``: the process starts the lab's Ray, and :attr:`ray_env` is what another
    process needs to join it: its address, and a token made for this Ray only (Ray's token
    authentication), so that no other submission's kernel can join it.
    """

    def __init__(self, lab: str, *, ray: bool = False, sandbox_dir: Path | None = None, share: tuple[str, ...] = (),
                 cgroup: tuple[str, ...] = (), copy: str = "reference", learner: dict | None = None,
                 env: dict[str, str] | None = None, uid: int = sandbox.GRADER_RAY_UID):
        """``copy``: ``reference``, ``degraded`` (the lab reference's ``degraded()``), or
        ``instruments`` (the lab's kit steps only, no reference: the process that starts a lab's
        Ray for the learner where the reference has a Ray of its own). ``uid``: the user it runs
        as when sandboxed (a reference with a Ray of its own: :data:`~autograder.grader.isolation.sandbox.REFERENCE_UID`).
        ``learner``: run in a learner's kernel sandbox made from this spec
        (:func:`autograder.grader.nbgrading.nbgrader_run.learner_spec`), in ``sandbox_dir``, with ``env``
        added (a Ray lab's address and token), instead of as the grader's reference."""
        from ...transport import Learner

        self._ready, self._done = threading.Event(), threading.Event()
        self._conn = None
        # a learner copy in a Ray lab enters that Ray's sandbox, which shows sandbox_dir
        self._endpoint = Endpoint(self._hold, gid=SANDBOX_GID if sandbox_dir else None,
                                  under=sandbox_dir if learner is not None else None)
        self._log = tempfile.TemporaryFile(mode="w+")
        env = {**{k: v for k, v in without(dict(os.environ)).items() if k != "RAY_ADDRESS"}, **(env or {})}  # no seed
        self.ray_env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)} if ray else {}
        env.update(self.ray_env)
        if ray:
            env.update(RAY_SETTINGS)
        command = [sys.executable, *SAFE_PATH, "-m", __name__, lab, copy]
        self.network_from = None  # bubblewrap's report on the sandbox: the kernel joins its network
        fds = []
        if learner is not None:
            from . import kernel_launcher

            fds = [sandbox.passable(sources_fd(lab))]
            env[SOURCES_FD_ENV] = str(fds[0])
            cwd = str(sandbox_dir / "work")
            command = kernel_launcher.box(learner, cwd, readable=(self._endpoint.address,)).argv(command, cwd=cwd)
        elif sandbox_dir is not None:
            self.network_from = sandbox_dir / "ray-sandbox.json"
            fds = [sandbox.passable(os.open(self.network_from, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))]
            if copy != "instruments":
                fds.append(sandbox.passable(sources_fd(lab)))
                env[SOURCES_FD_ENV] = str(fds[1])
            command = self._sandboxed(command, sandbox_dir, fds[0], share, cgroup, uid)
        try:
            self.proc = subprocess.Popen(command, env={**env, **self._endpoint.env}, stdin=subprocess.DEVNULL,
                                         stdout=self._log, stderr=subprocess.STDOUT, pass_fds=tuple(fds))
        finally:
            for fd in fds:
                os.close(fd)
        if not self._started():
            said = self.log()[-500:]  # before close(), which closes the log
            self.close()
            raise RuntimeError(f"the reference process did not start: {said}")
        self.remote = Learner(self._conn)
        if ray:
            from ...labs import ray_start

            self.ray_env["RAY_ADDRESS"] = self.remote.kit.address(ray_start(lab), what="starting the lab's Ray",
                                                                  returns="string", timeout_s=START_TIMEOUT_S)

    def _sandboxed(self, command: list[str], folder: Path, info_fd: int, share: tuple[str, ...],
                   cgroup: tuple[str, ...], uid: int) -> list[str]:
        """``command`` inside a sandbox of user ``uid``, the grader's Ray user (:mod:`autograder.grader.isolation.sandbox`)
        unless the reference has a Ray of its own.

        Learner actors run in this Ray's workers, so this Ray -- and this process, which starts
        it -- get no more powers than they do: no grader process, file or network in sight. Its
        GCS server and raylet run from copies the sandbox user cannot read, so that they are not
        dumpable: same-uid learner code cannot read or write their memory (Ray's records).
        Its session files live in ``folder/ray``, at ``/tmp/ray``. The reference implementations
        are not in it (learner tasks run here): this process reads them from a file descriptor
        (:func:`sources_fd`) and its Ray job's workers get them pickled by value. The kernel's sandbox enters
        this one's namespaces (bubblewrap writes the pid to ``info_fd``), so what it needs from
        the grader -- ``folder`` (its sockets and kernelspec), ``share`` (the notebook's folder,
        its endpoint) -- is bound here too, at the same paths.
        """

        shared = folder / "ray"
        shared.mkdir(exist_ok=True)
        os.chown(shared, uid, sandbox.SANDBOX_GID)
        os.chmod(shared, 0o2770)
        kit, hidden = sandbox.kit_paths(reference=False)
        box = sandbox.Sandbox(uid=uid, readable=(*sandbox.python_paths(), *kit, self._endpoint.address),
                              hidden=hidden,
                              writable=(str(folder), *share),
                              binds=((str(shared), "/tmp/ray"),), etc=sandbox.etc_files(folder / "etc"),
                              exec_only=sandbox.ray_daemons(), cgroup=cgroup)
        return box.argv(command, cwd="/tmp", info_fd=info_fd)

    def _started(self) -> bool:
        """Whether the process connected within :data:`START_TIMEOUT_S`; ``False`` as soon as it
        exits without connecting (a sandbox that could not start it says why in the log)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._ready.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                return self._ready.is_set()
        return True

    def _hold(self, conn) -> None:
        """The endpoint's handler: hand the connection over, keep it open until :meth:`close`."""
        self._conn = conn
        self._ready.set()
        self._done.wait()

    def log(self) -> str:
        """What the process wrote (Ray's start-up messages, a traceback if it failed)."""
        self._log.seek(0)
        return self._log.read()

    def close(self) -> None:
        """Stop the process (and the Ray it started) and wait for it."""
        if self._conn is not None and not self._conn.closed:
            try:
                send(self._conn, {"op": "bye"})
            except ProtocolError:
                pass
        if processes.reap(self.proc, 30) is None:
            processes.end(self.proc)
        self._done.set()
        self._endpoint.close()
        self._log.close()


def sources_fd(lab: str) -> int:
    """A memory file holding ``lab``'s reference implementations (JSON: module name and source),
    for a sandboxed reference process whose sandbox shows an empty folder in their place."""
    name = labs.module_name(lab, "reference")
    path = Path(__file__).resolve().parents[2] / "labs" / f"lab{lab[:2]}" / "reference" / "__init__.py"
    fd = os.memfd_create("autograder-reference", 0)
    os.write(fd, json.dumps({"name": name, "source": path.read_text()} if path.exists() else {}).encode())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def load_sources() -> None:
    """Install the reference module handed over by :func:`sources_fd`, if any, as an importable
    package, and have Ray pickle it by value (the workers' sandbox does not show it)."""
    fd = os.environ.pop(SOURCES_FD_ENV, None)
    if fd is None:
        return
    with os.fdopen(int(fd), "rb") as f:
        handed = json.loads(f.read().decode())
    if not handed:
        return
    name = handed["name"]
    parent = importlib.import_module(name.rsplit(".", 1)[0])
    module = types.ModuleType(name)
    module.__file__ = f"<{name}, handed over by the grader>"
    module.__path__, module.__package__ = [], name
    sys.modules[name] = module
    exec(compile(handed["source"], module.__file__, "exec"), vars(module))
    setattr(parent, "reference", module)
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(module)


def learner_jobs_join(lab: str, copy: str) -> bool:
    """Whether learner jobs join the Ray this process starts: the lab's Ray (:func:`~autograder.labs.needs_ray`),
    unless this is a reference with a Ray of its own (:func:`~autograder.labs.own_reference_ray`), which
    no learner process reaches. (Unsandboxed, such a lab's one Ray is shared, but there learner code
    runs as the grader's user anyway.)"""
    return labs.needs_ray(lab) and (copy == "instruments" or not labs.own_reference_ray(lab))


def main(lab: str, copy: str = "reference") -> None:
    """Serve the grader's requests on the reference implementations (or their ``degraded`` copy)
    until it says bye."""
    from ... import labs
    from ...kernel import agent, channel
    from ..isolation import ray_job

    if copy not in ("reference", "degraded", "instruments"):
        sys.exit(f"no copy {copy!r} of the reference: reference, degraded or instruments")
    if copy != "degraded":  # this process not traceable, nor its Ray job's workers where learner jobs join its Ray
        ray_job.install(workers=learner_jobs_join(lab, copy))
    conn = channel.connect()
    for name in (channel.ENDPOINT_ENV, channel.KEY_ENV):  # not inherited by the Ray this process starts,
        os.environ.pop(name, None)                       # whose workers run learner code in Ray labs
    load_sources()  # a sandboxed reference process: its reference code, handed over
    labs.load_steps(lab)  # the lab's own kit steps, if it has any
    names = {} if copy == "instruments" else reference(lab)
    if copy == "degraded":
        names = names["degraded"]()
    callback = agent.callback_for(conn)
    try:
        while True:
            message = recv(conn)
            if message.get("op") != "call":
                break
            send(conn, agent.execute(message, callback, names))
    except ProtocolError:
        pass
    finally:
        from course import cluster

        cluster.stop()  # the lab's Ray, an emulated cluster's nodes included


if __name__ == "__main__":
    if not os.environ.get(ENDPOINT_ENV):
        sys.exit("run by the autograder only")
    main(*sys.argv[1:3])
