"""A control group for one grading's sandboxes: caps the kernel counts, not the user.

``RLIMIT_NPROC`` counts every process of a uid machine-wide, so a fork bomb in one sandbox
starves every other sandbox running as the same uid; and memory held in a sandbox's tmpfs
(``/tmp``, ``/dev/shm``, the home) is in no process's resident set, so a watch over the
process tree misses it. A control group (cgroup) with the ``pids`` and ``memory`` controllers
counts both for exactly the processes in it, tmpfs pages included, and the kernel enforces
them: ``fork`` fails at ``pids.max``, and the OOM killer stops the group at its memory limit
(swap included, where the kernel accounts it). Docker, podman and systemd cap containers
the same way.

Cgroup v1 (a hierarchy per controller, as on this kit's CI machines) and v2 (one unified
hierarchy whose ``cgroup.subtree_control`` already enables both controllers) are supported;
groups are made under the grader's own cgroup. Where neither can be written (not root, no
delegation), :func:`create` returns ``None`` and the sandbox falls back to ``RLIMIT_NPROC``
and the grader's memory watch.

A group may also hold a freezer group for its learner side (:attr:`Cgroup.freezer`): the
kernel and the Ray its actors run in, not the reference's sandbox. The grader pauses it while
the reference's turn of a side-by-side measurement is timed (:meth:`Cgroup.paused`), so that
learner code cannot spend the cores then to slow the reference (the v1 ``freezer``
controller, or v2's ``cgroup.freeze`` in a child group). Where freezing distorts a lab's timing
(lab 04's emulated cluster ran slower after every thaw), the learner side instead drops to idle
CPU priority for the reference's turns (:meth:`Cgroup.idle`): a ``cpu`` group whose ``cpu.idle``
is set runs only on cores nothing else wants, so a spinner there cannot slow the reference, while
Ray's daemons on that side keep running.

Both sides of a timed comparison get the same: the reference's side (its process and its own
Ray) has a cpu group of its own beside the learner's, at the same weight (:attr:`Cgroup.reference_cpu`),
dropped to idle priority while the learner's turns are timed (``idle(side="reference")``). Without
it the reference's ~800 threads sat in the root group one by one, never idled, and burned
0.16-0.18 CPU-s inside each of the learner's timed windows against 0.06-0.09 the other way (lab 04,
2 cores, docs/measurement.md#same-conditions).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids")


def _hierarchies() -> tuple[Path, ...] | None:
    """The folders of this process's own cgroups where ours can be made: one per controller
    (v1), or one for both (v2); ``None`` where there are none."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    v1, unified = {}, None
    for line in lines:
        _, names, path = line.split(":", 2)
        for name in names.split(","):
            if name in CONTROLLERS:
                v1[name] = ROOT / name / path.lstrip("/")
        if names == "":
            unified = ROOT / path.lstrip("/")
    if set(v1) == set(CONTROLLERS):
        folders = tuple(v1[c] for c in CONTROLLERS)
        return folders if all(os.access(f, os.W_OK) for f in folders) else None
    if unified is not None and unified.is_dir():
        try:
            enabled = (unified / "cgroup.subtree_control").read_text().split()
        except OSError:
            return None
        if set(CONTROLLERS) <= set(enabled) and os.access(unified, os.W_OK):
            return (unified,)
    return None


@dataclass(frozen=True)
class Cgroup:
    """One grading's control group: its folder in each hierarchy."""

    folders: tuple[Path, ...]
    memory_bytes: int | None
    freezer: Path | None = None  # the learner side's freezer group, where one could be made
    cpu: Path | None = None  # the learner side's cpu group (its weight dropped by idle()), where one could be made
    reference_cpu: Path | None = None  # the reference side's, beside it at the same weight, where one could be made

    @property
    def procs(self) -> tuple[str, ...]:
        """The ``cgroup.procs`` files a process writes its pid to, to join (see
        :meth:`autograder.grader.isolation.sandbox.Sandbox.argv`)."""
        return tuple(str(f / "cgroup.procs") for f in self.folders)

    @property
    def sides(self) -> tuple[Path, ...]:
        """The learner side's own folders: its freezer and cpu groups (on v2 one child folder)."""
        return tuple(dict.fromkeys(f for f in (self.freezer, self.cpu) if f is not None))

    @property
    def every_folder(self) -> tuple[Path, ...]:
        """Every folder of the group, its two sides' first (what :meth:`close` removes)."""
        return self.sides + tuple(f for f in (self.reference_cpu,) if f is not None) + self.folders

    @property
    def reference_procs(self) -> tuple[str, ...]:
        """What a process of the reference's side (the reference process and its own Ray) joins:
        the group, for its caps, then the reference's cpu group, where there is one."""
        return self.procs + tuple(str(f / "cgroup.procs") for f in (self.reference_cpu,) if f is not None)

    @property
    def learner_procs(self) -> tuple[str, ...]:
        """What a process of the learner's side joins: the group, then its freezer and cpu groups
        (on v2 one child of the group, so the last write moves it there; the caps still count it)."""
        return self.procs + tuple(str(f / "cgroup.procs") for f in self.sides)

    @contextlib.contextmanager
    def paused(self) -> Iterator[bool]:
        """The learner side frozen for the ``with`` block (whether it could be): its processes
        get no CPU time, and go on where they were after it. Waits at most 1 s for the freeze
        to take (a process in an uninterruptible wait finishes it first)."""
        if self.freezer is None:
            yield False
            return
        try:
            _freeze(self.freezer, True)
        except OSError:
            yield False
            return
        try:
            yield _wait_frozen(self.freezer)
        finally:
            try:
                _freeze(self.freezer, False)
            except OSError:  # closed in the meantime (its processes killed)
                pass

    @contextlib.contextmanager
    def idle(self, side: str = "learner") -> Iterator[bool]:
        """One side's cpu group at idle CPU priority for the ``with`` block (whether it could be):
        it runs only on cores no other process wants (``cpu.idle``, Linux >= 5.15; else the least
        weight, ``cpu.shares`` 2 or ``cpu.weight`` 1), so it cannot take them from the other side's
        timed turn, and nothing of it stops. ``side``: ``"learner"`` (in the reference's turns) or
        ``"reference"`` (in the learner's). Learner processes cannot leave their group or raise its weight."""
        folder = self.reference_cpu if side == "reference" else self.cpu
        if folder is None:
            yield False
            return
        try:
            restore = _lower(folder)
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            for name, value in restore:
                try:
                    (folder / name).write_text(value)
                except OSError:  # closed in the meantime
                    pass

    def enter(self, pid: int) -> tuple[Path, ...]:
        """Move ``pid`` (and so all it starts later) into the group, and on v1 into its own freezer
        and cpu groups too: a group made from inside it then nests its learner side's groups there,
        so that :func:`sweep` of :meth:`every_folder` ends them too (a grading slot's group). On v2
        they nest anyway, and its ``learner`` child stays empty. The folders it was moved into."""
        own = tuple(f for f in self.sides if not any(f.is_relative_to(g) for g in self.folders))
        if self.reference_cpu is not None:  # unused: each grading makes its reference side inside this cpu group
            try:
                self.reference_cpu.rmdir()
            except OSError:
                pass
        for folder in self.folders + own:
            (folder / "cgroup.procs").write_text(str(pid))
        return self.folders + own

    def _read(self, name: str) -> str:
        for folder in self.folders:
            try:
                return (folder / name).read_text()
            except OSError:
                continue
        return ""

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer stopped in this group (its memory cap)."""
        for name in ("memory.events", "memory.oom_control"):  # v2, v1 (Linux >= 4.13)
            for line in self._read(name).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def peak_bytes(self) -> int:
        """The most memory the group held at once (tmpfs and page cache included)."""
        text = self._read("memory.peak") or self._read("memory.max_usage_in_bytes")
        return int(text) if text.strip().isdigit() else 0

    def pids(self) -> list[int]:
        """The processes in the group now."""
        return sorted({int(p) for f in self.learner_procs + self.reference_procs for p in _words(Path(f))})

    def close(self, wait_s: float = 10.0) -> int:
        """Kill what is left in the group and remove it; the number of processes killed.
        Frozen processes are thawed first: a frozen process cannot act on ``SIGKILL``."""
        killed, deadline = set(), time.monotonic() + wait_s
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:  # all thawed first, then all killed, in a tight loop
                _thaw_of(pid)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
                except OSError:
                    pass
            time.sleep(0.05)
        for folder in self.every_folder:
            for _ in range(100):  # a killed process leaves the group a moment after it dies
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
        return len(killed)


def _freeze(folder: Path, frozen: bool) -> None:
    """Freeze or thaw the group ``folder`` (v2's ``cgroup.freeze``, else v1's ``freezer.state``)."""
    if (folder / "cgroup.freeze").exists():
        (folder / "cgroup.freeze").write_text("1" if frozen else "0")
    else:
        (folder / "freezer.state").write_text("FROZEN" if frozen else "THAWED")


def freezable(folders) -> list[Path]:
    """Those of ``folders`` that can be frozen as a whole: a v1 ``freezer`` group, or a v2 group
    (``cgroup.freeze``); freezing one freezes every group nested in it."""
    return [Path(f) for f in folders if (Path(f) / "freezer.state").exists() or (Path(f) / "cgroup.freeze").exists()]


def freeze(folders: list[Path], wait_s: float = 1.0) -> list[Path]:
    """Freeze the groups ``folders`` (from :func:`freezable`) and wait up to ``wait_s`` each for
    their processes to stop; those that could be frozen (thaw them with :func:`thaw`)."""
    done = []
    for folder in folders:
        try:
            _freeze(folder, True)
        except OSError:  # gone in the meantime: its grading ended
            continue
        done.append(folder)
    for folder in done:
        _wait_frozen(folder, wait_s)
    return done


def thaw(folders: list[Path]) -> None:
    """Thaw the groups ``folders``, each that still exists."""
    for folder in folders:
        try:
            _freeze(Path(folder), False)
        except OSError:
            pass


def has_processes(folder: Path) -> bool:
    """Whether any process is in the group ``folder`` or a group nested in it."""
    try:
        return any(_words(f) for f in Path(folder).rglob("cgroup.procs"))
    except OSError:
        return False


def _wait_frozen(folder: Path, wait_s: float = 1.0) -> bool:
    """Whether every process of ``folder`` stopped within ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if (folder / "cgroup.events").exists():
                done = "frozen 1" in (folder / "cgroup.events").read_text().splitlines()
            else:
                done = (folder / "freezer.state").read_text().strip() == "FROZEN"
        except OSError:
            return False
        if done or time.monotonic() > deadline:
            return done
        time.sleep(0.001)


def _lower(folder: Path) -> list[tuple[str, str]]:
    """Put the cpu group ``folder`` at idle priority; the (file, value) pairs that undo it."""
    for name, low in (("cpu.idle", "1"), ("cpu.shares", "2"), ("cpu.weight", "1")):
        if (folder / name).exists():
            before = (folder / name).read_text().strip()
            (folder / name).write_text(low)
            return [(name, before)]
    raise OSError(f"no CPU weight to lower in {folder}")


def _thaw_of(pid: int) -> None:
    """Thaw the freezer group ``pid`` is in, if it is one of ours (a grading stopped while the
    learner side was frozen leaves it so; :func:`sweep` and :meth:`Cgroup.close` end it)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return
    for line in lines:
        _, names, path = line.split(":", 2)
        folder = (ROOT / "freezer" if "freezer" in names.split(",") else ROOT if names == "" else None)
        if folder is None or "autograder" not in path:
            continue
        folder = folder / path.lstrip("/")
        try:
            _freeze(folder, False)
        except OSError:
            pass


def _side_folder(parents: tuple[Path, ...], name: str, controller: str) -> Path | None:
    """Where a learner-side group of ``controller`` (``freezer`` or ``cpu``) goes: the ``learner``
    child of the v2 group (whose ``cgroup.freeze`` always works, and whose ``cpu.idle`` needs the
    ``cpu`` controller), or a group of the v1 hierarchy of ``controller`` next to this process's
    own; ``None`` where neither can be made."""
    if len(parents) == 1:
        return parents[0] / name / "learner"
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if controller in names.split(","):
                folder = ROOT / names / path.lstrip("/")
                return folder / name if os.access(folder, os.W_OK) else None
    except OSError:
        pass
    return None


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def _cpuset_parent(parents: tuple[Path, ...]) -> Path | None:
    """Where a ``cpuset`` group can be made next to ``parents``: the v2 folder itself when its
    subtree has the controller, else this process's v1 ``cpuset`` hierarchy; ``None`` if neither."""
    if len(parents) == 1:  # v2: one folder, the controller enabled for its subtree
        try:
            return parents[0] if "cpuset" in (parents[0] / "cgroup.subtree_control").read_text().split() else None
        except OSError:
            return None
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if "cpuset" in names.split(","):
                folder = ROOT / "cpuset" / path.lstrip("/")
                return folder if os.access(folder, os.W_OK) else None
    except OSError:
        pass
    return None


def create(*, memory_bytes: int | None, processes: int, cpus: tuple[int, ...] = (),
           name: str = "autograder", pausable: bool = False) -> Cgroup | None:
    """A new group capped at ``memory_bytes`` (no swap beyond it; ``None``: no memory cap) and
    ``processes`` processes and threads; ``None`` where this machine lets the grader make none.

    ``cpus``: the group's processes may run on these cores only (a grading slot,
    :mod:`autograder.grader.engine.slots`), enforced by the ``cpuset`` controller, so that learner code
    cannot widen its own affinity onto another slot's cores; where the controller cannot be
    written the slot's affinity alone holds them (which a process may widen).

    ``pausable``: with a freezer group and a cpu group for the learner's side
    (:meth:`Cgroup.paused`, :meth:`Cgroup.idle`), where this machine lets the grader make them.
    """
    parents = base = _hierarchies()
    if parents is None:
        return None
    cpuset = _cpuset_parent(parents) if cpus else None
    if cpuset is not None and cpuset not in parents:
        parents = (*parents, cpuset)
    folders = tuple(p / f"{name}-{secrets.token_hex(4)}" for p in parents)
    made: list[Path] = []
    try:
        for folder in folders:
            folder.mkdir()
            made.append(folder)
        if memory_bytes:
            _limit(folders, ("memory.max", "memory.limit_in_bytes"), str(memory_bytes))
            # no swap beyond the cap: v2 counts swap on its own (none of it), v1 memory and swap together
            _limit(folders, ("memory.swap.max",), "0", optional=True)
            _limit(folders, ("memory.memsw.limit_in_bytes",), str(memory_bytes), optional=True)
        _limit(folders, ("pids.max",), str(processes))
        if cpuset is not None:  # v1 wants both set before a process may join
            _limit(folders, ("cpuset.cpus",), ",".join(map(str, sorted(cpus))))
            mems = next(((f.parent / "cpuset.effective_mems").read_text().strip() for f in folders
                         if (f.parent / "cpuset.effective_mems").exists()), "0")
            _limit(folders, ("cpuset.mems",), mems)
    except OSError:
        for folder in made:
            try:
                folder.rmdir()
            except OSError:
                pass
        return None
    sides = [_side_folder(base, folders[0].name, c) if pausable else None for c in ("freezer", "cpu")]
    for i, folder in enumerate(sides):
        try:
            if folder is not None and not folder.exists():
                folder.mkdir()
        except OSError:
            sides[i] = None
    freezer, cpu = sides
    if cpu is not None and len(base) == 1 and not (cpu / "cpu.weight").exists():
        cpu = None  # v2 without the cpu controller in the group's subtree
    return Cgroup(folders, memory_bytes, freezer, cpu, _reference_cpu(cpu))


def _reference_cpu(learner: Path | None) -> Path | None:
    """The reference side's cpu group, made beside the learner side's ``learner`` (same parent,
    same default weight), so that neither side's threads count for more than the other's; ``None``
    where there is no learner-side group or this one cannot be made."""
    if learner is None:
        return None
    folder = learner.parent / ("reference" if learner.name == "learner" else f"{learner.name}-reference")
    try:
        folder.mkdir(exist_ok=True)
    except OSError:
        return None
    return folder


def _limit(folders: tuple[Path, ...], names: tuple[str, ...], value: str, optional: bool = False) -> None:
    """Write one limit in whichever folder holds one of its file ``names``."""
    for folder in folders:
        for name in names:
            if (folder / name).exists():
                (folder / name).write_text(value)
                return
    if not optional:
        raise OSError(f"none of {names} here")


def sweep(folders: list[str]) -> int:
    """Kill every process in the groups ``folders`` and in the groups nested under them, and
    remove them all, deepest first: what a grading killed half-way left (its own group, and the
    groups of its sandboxes inside it). The number of processes killed."""
    killed = 0
    for top in map(Path, folders):
        if not top.is_dir():
            continue
        nested = sorted((f for f in top.rglob("*") if f.is_dir()), key=lambda f: len(f.parts), reverse=True)
        for folder in [*nested, top]:
            killed += Cgroup((folder,), None).close(wait_s=5.0)
    return killed
