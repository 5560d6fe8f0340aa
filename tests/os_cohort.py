"""A cohort with an OS attacker in it, and the outside it aims at (issue 26): a canary process,
canary files in a home-like folder of the grader's, a TCP listener on the host's loopback.
Graded through the real pipeline (``cohort.run``), the attacker first and an honest student
after it; what the attacker's probe (:mod:`attacks_os`) printed is read back from its graded
notebook, and the outside is checked around the run. Used by tests/test_sandbox_attacks.py and,
for the one lab 00 cohort CI grades, by tests/cohort_lab00.py."""

from __future__ import annotations

import csv
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

import attacks_os
from attacks_os import MARK
from autograder.grader.engine import cohort
from autograder.grader.isolation import sandbox
from notebooks import make_course, submit, variant

SANDBOX_UIDS = (sandbox.LEARNER_UID, sandbox.GRADER_RAY_UID, sandbox.REFERENCE_UID)
LAST_GRADED = {"00_measure": "test-ray-task", "01_actor_scaling": "test-model-long-kernel"}
ATTACKER, HONEST = "a-attacker", "b-honest"  # graded in this order (cohort sorts by student)


class Outside:
    """A canary process, canary files in a home-like folder of the grader's, a TCP listener on
    the host's loopback; what the attacker is told about them (:func:`attacks_os.targets`)."""

    def __init__(self, tmp: Path, course: Path, lab: str, honest: str = HONEST):
        self.word = f"{MARK}-canary-{os.getpid()}"
        self.canary = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(7200)", self.word])
        self.home = tmp / "grader-home"
        self.home.mkdir()
        self.files = {}
        for name in ("canary.txt", "overwrite-me.txt", "chmod-me.txt"):
            p = self.home / name
            p.write_text(f"canary {name}\n")
            os.chmod(p, 0o600)
            self.files[name] = p
        self.accepted: list[str] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._accept, daemon=True).start()
        self.host_before = host_leftovers()
        self.site_before = sorted(os.listdir(sysconfig.get_paths()["purelib"]))
        kit_ref = sandbox.KIT_ROOT / "autograder" / "labs" / f"lab{lab[:2]}" / "reference"
        self.T = attacks_os.targets(
            canary_pid=self.canary.pid, canary_word=self.word, canary_file=str(self.files["canary.txt"]),
            overwrite_canary=str(self.files["overwrite-me.txt"]), chmod_canary=str(self.files["chmod-me.txt"]),
            course=str(course), other_submission=str(course / "submitted" / honest / lab / f"{lab}.ipynb"),
            kit=str(sandbox.KIT_ROOT), other_kits=other_kits(), reference_file=f"labs/lab{lab[:2]}/reference/__init__.py",
            home_allowed=home_allowed(), host_tmp_dir="/tmp", notebook_name=f"{lab}.ipynb",
            port=self.listener.getsockname()[1], grader_words=["reference_process", "raylet", "gcs_server"])
        assert (sandbox.KIT_ROOT / "autograder" / self.T["reference_file"]).is_file() and kit_ref.is_dir()

    def _accept(self):
        while True:
            try:
                conn, addr = self.listener.accept()
            except OSError:
                return
            self.accepted.append(f"{addr}: {conn.recv(200)!r}")
            conn.close()

    def canary_state(self) -> dict:
        status = dict(line.split(":", 1) for line in Path(f"/proc/{self.canary.pid}/status").read_text().splitlines())
        return {"alive": self.canary.poll() is None, "state": status["State"].split()[0],
                "tracer": int(status["TracerPid"]), "nice": os.getpriority(os.PRIO_PROCESS, self.canary.pid)}

    def close(self):
        self.listener.close()
        self.canary.kill()
        self.canary.wait()


def other_kits() -> list[str]:
    """Other copies of the kit this Python imports (an editable install elsewhere than the tree
    under test): their reference implementations must be out of reach too."""
    out = set()
    for finder in glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "__editable__*finder.py")):
        text = Path(finder).read_text()
        for name in ("autograder", "course"):
            for line in text.splitlines():
                if line.startswith("MAPPING") and f"'{name}': '" in line:
                    out.add(str(Path(line.split(f"'{name}': '")[1].split("'")[0]).parent))
    return sorted(p for p in out if Path(p).resolve() != sandbox.KIT_ROOT)


def home_allowed() -> list[str]:
    """What of the grader's home a sandbox shows by design: the Python install, if it lives there."""
    home = os.path.expanduser("~")
    return sorted({Path(p).relative_to(home).parts[0] for p in sandbox.python_paths() if p.startswith(home + "/")})


def host_leftovers() -> list[str]:
    """Files named by the attack where a later process on the host would find them."""
    home = Path.home()
    places = ["/tmp", "/dev/shm", str(home), str(home / ".ipython/profile_default/startup"), str(home / ".ray"),
              str(home / ".config/matplotlib"), str(home / ".config/pip"), str(home / ".pip"), str(home / ".jupyter"),
              sysconfig.get_paths()["purelib"], sysconfig.get_paths()["stdlib"]]
    out = [p for place in places for p in glob.glob(os.path.join(place, f"*{MARK}*")) if "canary" not in p]
    for rc in (home / ".bashrc", home / ".profile"):
        if rc.is_file() and MARK in rc.read_text(errors="replace"):
            out.append(str(rc))
    return sorted(out)


def sandbox_processes(lab: str, students=(ATTACKER, HONEST)) -> list[str]:
    """Processes of the sandbox's users started for this test's ``students`` (their working folder
    names the student: other sandboxes may run on a shared machine), or carrying the attack's
    daemon marker, on the host."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            uid = int(next(ln for ln in open(f"/proc/{p}/status") if ln.startswith("Uid:")).split()[1])
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, StopIteration):
            continue
        try:
            cwd = os.readlink(f"/proc/{p}/cwd")
        except OSError:
            cwd = ""
        if (uid in SANDBOX_UIDS and any(f"/{s}/{lab}" in cwd for s in students)) or f"{MARK}-daemon" in cmd:
            out.append(f"{p} uid {uid}: {cmd[:100]}")
    return out


# -- one cohort: the attacker, then an honest student -------------------------------------------

def grade_cohort(tmp: Path, lab: str, attack_cells, base: Path | None = None, honest: str = HONEST,
                 others: dict[str, Path] | None = None, **limits) -> dict:
    """Grade ``lab``'s cohort: the attacker (``base``, or the solution, with ``attack_cells(T)``
    after its last graded cell), the honest student ``honest`` (the solution) after it, and
    ``others`` (student -> notebook); the outside is recorded before and after."""
    course = make_course(tmp / "course", [lab])
    outside = Outside(tmp, course, lab, honest)
    students = [ATTACKER, honest, *(others or {})]
    assert sorted(students)[:2] == [ATTACKER, honest], "the attacker is graded first, the honest student next"
    try:
        submit(course, honest, lab, variant(lab, tmp / "honest.ipynb"))
        attacker = variant(lab, tmp / "attacker.ipynb", base=base, after={LAST_GRADED[lab]: attack_cells(outside.T)})
        submit(course, ATTACKER, lab, attacker)
        for student, nb in (others or {}).items():
            submit(course, student, lab, nb)
        canary_before = outside.canary_state()
        started = time.perf_counter()
        code = cohort.run(course, lab, **{"cell_timeout_s": 300, "timeout_s": 1200, **limits})
        seconds = time.perf_counter() - started
        print(f"\n{lab}: {len(students)} submissions graded in {seconds:.0f} s")
        with open(course / "grades.csv") as f:
            rows = {r["student_id"]: r for r in csv.DictReader(f)}
        folder = course / "autograded" / ATTACKER / lab
        reports = printed_reports(folder)
        return {"code": code, "rows": rows, "course": course, "reports": reports, "outside": outside,
                "honest": honest, "canary_before": canary_before, "canary_after": outside.canary_state(),
                "seconds": seconds, "left": sandbox_processes(lab, students), "host_after": host_leftovers(),
                "site_after": sorted(os.listdir(sysconfig.get_paths()["purelib"])),
                "files_after": {n: (p.read_text(errors="replace"), oct(p.stat().st_mode & 0o777))
                                for n, p in outside.files.items()}}
    finally:
        outside.close()


def kill_left(graded: dict) -> None:
    """Kill what a cohort left running (a leftover found is a test's failure; do not leave it running)."""
    for line in graded["left"]:
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def printed_reports(folder):
    """who -> report, from the lines the attacks printed into the graded notebook (the kernel
    works in a folder of its own: nothing it writes comes back to the grader's folder)."""
    out = {}
    for nb in folder.glob("*.ipynb"):
        for cell in json.loads(nb.read_text()).get("cells", []):
            for o in cell.get("outputs", []):
                for line in "".join(o.get("text", "")).splitlines():
                    if line.startswith("OS-ATTACK-REPORT "):
                        _, who, report = line.split(" ", 2)
                        out[who] = json.loads(report)
    return out
