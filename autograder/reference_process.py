"""The lab's reference implementations in a process of their own, driven like a learner's kernel.

The grader runs no learner code and unpickles nothing learner code made; it does not run
the reference in its own process either, so that both sides are measured the same way:
requests over a channel (:mod:`autograder.channel`), carried out by the same kit code
(:mod:`autograder.agent`), timed by the grader's clock, interleaved.

For labs whose checks need Ray, this process also *starts* the lab's Ray (the fleet's
resources, :func:`course.fleet.start`); the learner's kernel joins it through
``RAY_ADDRESS``. So the grader's armed fleet, the learner's actors and the reference's
actors share one cluster that the grader owns, and it ends with the submission.

Run as ``python -m autograder.reference_process LAB`` by :class:`ReferenceProcess` only.
"""

from __future__ import annotations

import importlib
import os
import secrets
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from .channel import ENDPOINT_ENV, Endpoint, ProtocolError, recv, send
from .grader.sandbox import SANDBOX_GID
from .processes import SAFE_PATH
from .seed import without

START_TIMEOUT_S = 120.0


class InstructorOnly(Exception):
    """A check needs the reference implementations, and this install has none (a student
    bundle, ``python -m autograder release``): only the instructor's grading measures it."""


def namespace(lab: str) -> dict:
    """The reference implementations of ``lab``, by the names the learner's notebook uses.

    Raises :class:`InstructorOnly` in a student bundle, which leaves them out.
    """
    module = f"autograder.reference.lab{lab[:2]}"
    try:
        return vars(importlib.import_module(module))
    except ModuleNotFoundError as exc:
        if exc.name in ("autograder.reference", module):
            raise InstructorOnly(f"{module} is not in this install") from None
        raise


class ReferenceProcess:
    """A running reference process for ``lab``; :attr:`remote` calls into it (a ``Learner``).

    ``ray=True``: the process starts the lab's Ray, and :attr:`ray_env` is what another
    process needs to join it: its address, and a token made for this Ray only (Ray's token
    authentication), so that no other submission's kernel can join it.
    """

    def __init__(self, lab: str, *, ray: bool = False, sandbox_dir: Path | None = None, share: tuple[str, ...] = (),
                 cgroup: tuple[str, ...] = ()):
        from .session import Learner

        self._ready, self._done = threading.Event(), threading.Event()
        self._conn = None
        self._endpoint = Endpoint(self._hold, gid=SANDBOX_GID if sandbox_dir else None)
        self._log = tempfile.TemporaryFile(mode="w+")
        env = {k: v for k, v in without(dict(os.environ)).items() if k != "RAY_ADDRESS"}  # its own Ray, no seed
        self.ray_env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)} if ray else {}
        env.update(self.ray_env)
        command = [sys.executable, *SAFE_PATH, "-m", __name__, lab]
        self.network_from = None  # bubblewrap's report on the sandbox: the kernel joins its network
        info = -1
        if sandbox_dir is not None:
            self.network_from = sandbox_dir / "ray-sandbox.json"
            info = os.open(self.network_from, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            command = self._sandboxed(command, sandbox_dir, info, share, cgroup)
        try:
            self.proc = subprocess.Popen(command, env={**env, **self._endpoint.env}, stdin=subprocess.DEVNULL,
                                         stdout=self._log, stderr=subprocess.STDOUT,
                                         pass_fds=(info,) if info >= 0 else ())
        finally:
            if info >= 0:
                os.close(info)
        if not self._ready.wait(START_TIMEOUT_S):
            self.close()
            raise RuntimeError(f"the reference process did not start: {self.log()[-500:]}")
        self.remote = Learner(self._conn)
        if ray:
            from .checks import ray_start

            self.ray_env["RAY_ADDRESS"] = self.remote.call("kit.address", ray_start(lab), what="starting the lab's Ray",
                                                           returns="string", timeout_s=START_TIMEOUT_S)

    def _sandboxed(self, command: list[str], folder: Path, info_fd: int, share: tuple[str, ...],
                   cgroup: tuple[str, ...]) -> list[str]:
        """``command`` inside a sandbox of the grader's Ray user (:mod:`autograder.grader.sandbox`).

        Learner actors run in this Ray's workers, so this Ray -- and this process, which starts
        it -- get no more powers than they do: no grader process, file or network in sight.
        Its session files live in ``folder/ray``, at ``/tmp/ray``. The kernel's sandbox enters
        this one's namespaces (bubblewrap writes the pid to ``info_fd``), so what it needs from
        the grader -- ``folder`` (its sockets and kernelspec), ``share`` (the notebook's folder,
        its endpoint) -- is bound here too, at the same paths.
        """
        from .grader import sandbox

        shared = folder / "ray"
        shared.mkdir(exist_ok=True)
        os.chown(shared, sandbox.GRADER_RAY_UID, sandbox.SANDBOX_GID)
        os.chmod(shared, 0o2770)
        kit, _ = sandbox.kit_paths(reference=True)
        box = sandbox.Sandbox(uid=sandbox.GRADER_RAY_UID, readable=(*sandbox.python_paths(), *kit, self._endpoint.address),
                              writable=(str(folder), *share),
                              binds=((str(shared), "/tmp/ray"),), etc=sandbox.etc_files(folder / "etc"),
                              cgroup=cgroup)
        return box.argv(command, cwd="/tmp", info_fd=info_fd)

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
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._done.set()
        self._endpoint.close()
        self._log.close()


def main(lab: str) -> None:
    """Serve the grader's requests on the reference implementations until it says bye."""
    from . import agent, channel
    from .grader import ray_job

    from .checks import for_lab

    ray_job.install()  # this process and its Ray job's workers: not traceable, memory not readable
    conn = channel.connect()
    for name in (channel.ENDPOINT_ENV, channel.KEY_ENV):  # not inherited by the Ray this process starts,
        os.environ.pop(name, None)                       # whose workers run learner code in Ray labs
    for_lab(lab)  # the lab's own kit steps, if it has any
    names = namespace(lab)
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
    main(sys.argv[1])
