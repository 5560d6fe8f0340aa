"""The grading kernel's launcher: nbgrader starts this, it starts the kernel in the sandbox.

A kernelspec (``kernel.json``, written per submission by :func:`install`) names this module
instead of ``ipykernel_launcher``. Still the grader (root), before any learner code runs, it
makes the notebook's folder the sandbox user's, lets that user read the kernel's connection
file, and replaces itself with the sandboxed kernel (``os.execv``): the kernel nbgrader
manages *is* the sandbox.

Run as ``python -m autograder.grader.session.kernel_launcher SPEC.json CONNECTION_FILE``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..isolation import sandbox


def install(folder: Path, spec: dict) -> dict[str, str]:
    """Write the kernelspec and its spec under ``folder``; the environment that makes nbgrader
    (through ``jupyter_client``) find it first for the notebooks' ``python3`` kernel."""
    kernels = folder / "share" / "jupyter" / "kernels" / "python3"
    kernels.mkdir(parents=True, exist_ok=True)
    spec_path = folder / "kernel-sandbox.json"
    spec_path.write_text(json.dumps(spec))
    argv = [sys.executable, "-P", "-m", __name__, str(spec_path), "{connection_file}"]
    (kernels / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": "Python 3 (autograder sandbox)", "language": "python",
         # nbclient's interrupt (a cell past its limit) as a message: a signal to the process
         # nbgrader started reaches bwrap, not the kernel in its own session inside
         "interrupt_mode": "message"}))
    return {"JUPYTER_PATH": str(folder / "share" / "jupyter")}


def command(spec: dict, connection_file: str, cwd: str) -> list[str]:
    """The sandboxed kernel's command line (see :class:`autograder.grader.isolation.sandbox.Sandbox`)."""
    kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", connection_file]
    return box(spec, cwd, readable=(connection_file,)).argv(kernel, cwd=cwd)


def box(spec: dict, cwd: str, *, readable: tuple[str, ...] = ()) -> sandbox.Sandbox:
    """The sandbox a learner's kernel runs in, as ``spec`` describes it, working in ``cwd``; what
    else it may read (its connection file). ``calibrate`` runs its copies in the same one."""
    join = None
    if spec.get("join"):  # the lab's Ray sandbox: share its loopback and processes, nothing else
        pid = sandbox.info_child(Path(spec["join"]))
        if pid is None:
            raise SystemExit("the lab's Ray sandbox is not running")
        join = str(pid)
    # The notebook's folder stays the grader's: nbgrader (root) writes the graded notebook there
    # and chmods what it finds, following links a kernel could plant. The kernel works in an
    # empty, size-capped folder of its own at that path instead.
    return sandbox.Sandbox(uid=int(spec.get("uid", sandbox.LEARNER_UID)), writable=tuple(spec.get("writable", ())),
                           private=(cwd,),
                           readable=(*spec["readable"], *readable), hidden=tuple(spec.get("hidden", ())),
                           join=join, etc=spec["etc"], env=dict(spec.get("env", {})),
                           unset=tuple(spec.get("unset", ())), cgroup=tuple(spec.get("cgroup", ())),
                           seccomp=spec.get("seccomp"),
                           binds=tuple(map(tuple, spec.get("binds", ()))),
                           # a Ray lab's kernel shares its user (and its cgroup) with that Ray
                           limits=sandbox.Limits(processes=sandbox.KERNEL_PROCESSES) if join is None else sandbox.Limits())


def main(spec_path: str, connection_file: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    cwd = os.getcwd()
    # a copy the sandbox can read, in the grader's folder for this submission (nbclient may
    # write the original anywhere, e.g. /tmp, which a Ray lab's kernel does not see)
    copy = Path(spec_path).parent / "runtime" / Path(connection_file).name
    copy.write_bytes(Path(connection_file).read_bytes())
    os.chown(copy, 0, sandbox.SANDBOX_GID)
    os.chmod(copy, 0o640)
    argv = command(spec, str(copy), cwd)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(*sys.argv[1:3])
