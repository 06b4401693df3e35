"""A cgroup of each run's own, made directly in the cgroup filesystem (stdlib only).

The kernel enforces what a run declared: memory (`memory_gb`: the run is killed by the
memory controller's OOM killer, inside its group only, and nothing else on the host), CPU
(its processes' worth of cores, as CFS quota) and a number of processes. No systemd is
needed (cluster nodes and containers often have none): the agent, as root, makes the group
itself. Hosts are pure cgroup v2 (`memory.max`, `cpu.max`, `pids.max`), or hybrid/v1 with
the `memory`, `cpu` and `pids` controllers on hierarchies of their own
(`memory.limit_in_bytes`, `cpu.cfs_quota_us`, `pids.max`); each controller is taken where
the host has it.

Where a group goes: on a v1 hierarchy, under the agent's own group
(`<agent's group>/windtunnel/run-…`: nested within whatever limits the agent has); on v2,
beside it (`<parent of the agent's group>/windtunnel/run-…`: v2 lets a group hold
processes or child groups with controllers, not both, and the agent's group holds the
agent), or under WINDTUNNEL_CGROUP_PARENT (a group's path within each hierarchy, e.g.
`/system.slice/windtunnel.service`) when the deployment delegates one.

How a step enters its group: the agent moves itself into the run's group once, at the
run's start (`enter`), and every step inherits the group at fork, before any of its code
runs, so no process of the step is ever outside.
"""

from __future__ import annotations

import os
import signal
import threading
import time

TYPE_CHECKING = False  # typing is not imported at run time (every Slurm job starts an agent)
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "CONTROLLERS",
    "CgroupError",
    "Hierarchy",
    "RunCgroup",
    "find_hierarchies",
    "limits_problem",
    "write_limits",
]

CONTROLLERS = ("memory", "cpu", "pids")
CFS_PERIOD_US = 100_000
GROUP_DIR = "windtunnel"
_MOVE_LOCK = threading.Lock()  # the agent moves between groups one move at a time
AGENT_CPU = 0.1  # cores of a run's CPU quota for its agent, beside the run's own


class CgroupError(Exception):
    """No group can be made here: why, for the backend's health and the run's provenance."""


class Hierarchy:
    """One mounted hierarchy: v1 (one or more controllers of its own) or v2 (unified)."""

    __slots__ = ("controllers", "current", "mount", "version")

    def __init__(self, *, version: int, mount: str, current: str, controllers: tuple[str, ...]):
        self.version = version
        self.mount = mount  # where it is mounted
        self.current = current  # the agent's own group in it, relative ("/", "/a/b")
        self.controllers = controllers  # those of CONTROLLERS it gives

    def own_dir(self) -> str:
        return os.path.normpath(self.mount + self.current)

    def parent_dir(self, override: str = "") -> str:
        """Where the runs' groups are made (see the module's docstring)."""
        if override:  # a group of each hierarchy, e.g. /system.slice/windtunnel.service
            return os.path.join(os.path.normpath(self.mount + "/" + override), GROUP_DIR)
        if self.version == 1 or self.current == "/":
            return os.path.join(self.own_dir(), GROUP_DIR)
        return os.path.join(os.path.dirname(self.own_dir()), GROUP_DIR)

    def __repr__(self) -> str:
        return f"Hierarchy(v{self.version} {self.mount} {'+'.join(self.controllers)})"


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def find_hierarchies(
    *, mountinfo: str = "/proc/self/mountinfo", cgroup: str = "/proc/self/cgroup"
) -> list[Hierarchy]:
    """The hierarchies that give any of CONTROLLERS, each controller once (v1 first: on a
    hybrid host the v2 hierarchy has none of them)."""
    own: dict[str, str] = {}  # "memory" or "" (v2) -> own path
    for line in _read(cgroup).splitlines():
        _, names, path = line.split(":", 2)
        for name in names.split(",") if names else [""]:
            own[name] = path
    found: list[Hierarchy] = []
    taken: set[str] = set()
    unified = None
    for line in _read(mountinfo).splitlines():
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        fstype, mount, options = rfields[0], _unescape(fields[4]), rfields[2].split(",")
        if fstype == "cgroup":
            controllers = tuple(c for c in CONTROLLERS if c in options and c not in taken)
            if controllers and controllers[0] in own:
                found.append(
                    Hierarchy(
                        version=1, mount=mount, current=own[controllers[0]], controllers=controllers
                    )
                )
                taken.update(controllers)
        elif fstype == "cgroup2" and unified is None and "" in own:
            unified = (mount, own[""])
    if unified is not None:
        mount, current = unified
        try:
            available = _read(os.path.join(os.path.normpath(mount + current), "cgroup.controllers"))
        except OSError:
            available = ""
        if current != "/":  # what the agent's parent hands down is what a sibling gets
            try:
                parent = os.path.dirname(os.path.normpath(mount + current))
                available = _read(os.path.join(parent, "cgroup.subtree_control")) or available
            except OSError:
                pass
        controllers = tuple(c for c in CONTROLLERS if c in available.split() and c not in taken)
        if controllers:
            found.append(
                Hierarchy(version=2, mount=mount, current=current, controllers=controllers)
            )
    return found


def _unescape(path: str) -> str:
    return path.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n")


class RunCgroup:
    """The group of one run attempt, in every hierarchy that gives one of its controllers."""

    def __init__(self, dirs: list[tuple[Hierarchy, str]], *, memory_bytes: int) -> None:
        self.dirs = dirs  # (hierarchy, the run's group there)
        self.memory_bytes = memory_bytes
        self.controllers = tuple(c for h, _ in dirs for c in h.controllers)
        self._oom_at_start = self.oom_kills()
        self.entered = False

    @classmethod
    def create(
        cls,
        name: str,
        *,
        memory_bytes: int,
        cpus: float,
        processes: int,
        parent: str = "",
        hierarchies: list[Hierarchy] | None = None,
        require: tuple[str, ...] = ("memory",),
    ) -> RunCgroup:
        """Make the group `name` (with the agent's pid, `<name>-p<pid>`: each agent's own)
        with its limits (0: none of that kind). CgroupError when
        the host gives no writable cgroup hierarchy with the memory controller (the one
        limit that protects the rest of the host)."""
        found = find_hierarchies() if hierarchies is None else hierarchies
        for controller in require:
            if not any(controller in h.controllers for h in found):
                raise CgroupError(
                    f"no cgroup hierarchy with the {controller} controller is mounted"
                )
        dirs: list[tuple[Hierarchy, str]] = []
        try:
            for h in found:
                base = h.parent_dir(parent)
                _make_parent(h, base)
                _sweep(base)
                path = os.path.join(base, f"{name}-p{os.getpid()}")
                os.makedirs(path, exist_ok=True)
                dirs.append((h, path))
                write_limits(h, path, memory_bytes=memory_bytes, cpus=cpus, processes=processes)
        except OSError as exc:
            for _, path in dirs:
                _rmdir(path)
            raise CgroupError(f"cannot make the run's cgroup: {exc}") from exc
        return cls(dirs, memory_bytes=memory_bytes)

    def enter(self) -> None:
        """Put the agent itself in this group, for the rest of the run: every step it starts
        begins in it (inherited at fork, before any of the step's code runs). One move for
        the run: on a v1 hierarchy each move of a process waits for an RCU grace period
        (~10 ms), which a move per step paid every time. The agent is the run's: its CPU and
        memory count in the run's (the CPU quota has room for it, AGENT_CPU). The steps are
        the OOM killer's first choice (oom_score_adj 1000, sandbox.py), and where the agent
        may (CAP_SYS_RESOURCE) it is exempt (-1000): a run over its memory loses a step, not
        the agent that reports it; the agent then ends what is left of the run."""
        try:
            _write("/proc/self/oom_score_adj", "-1000")
        except OSError:
            pass
        pid = str(os.getpid())
        with _MOVE_LOCK:
            for _, path in self.dirs:
                _write(os.path.join(path, "cgroup.procs"), pid)
        self.entered = True

    def leave(self) -> None:
        """The agent back in its own groups (so this one can be removed)."""
        if not self.entered:
            return
        pid = str(os.getpid())
        with _MOVE_LOCK:
            for h, _ in self.dirs:
                try:
                    _write(os.path.join(h.own_dir(), "cgroup.procs"), pid)
                except OSError:
                    pass
        self.entered = False

    def _file(self, controller: str, v1: str, v2: str) -> str | None:
        for h, path in self.dirs:
            if controller in h.controllers:
                return os.path.join(path, v1 if h.version == 1 else v2)
        return None

    def oom_kills(self) -> int:
        """How many processes the memory limit killed in this group so far."""
        path = self._file("memory", "memory.oom_control", "memory.events")
        if path is None:
            return 0
        try:
            text = _read(path)
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def memory_exceeded(self) -> bool:
        """Whether the memory limit killed anything since the group was made."""
        return self.oom_kills() > self._oom_at_start

    def memory_peak(self) -> int | None:
        """The group's highest memory use, in bytes (None where the kernel does not keep it)."""
        path = self._file("memory", "memory.max_usage_in_bytes", "memory.peak")
        try:
            return int(_read(path).strip()) if path else None
        except (OSError, ValueError):
            return None

    def pids(self) -> list[int]:
        out: set[int] = set()
        for _, path in self.dirs:
            try:
                out.update(int(p) for p in _read(os.path.join(path, "cgroup.procs")).split())
            except OSError:
                continue
        return sorted(out)

    def kill_all(self, *, reap: Callable[[], object] | None = None, timeout: float = 5.0) -> None:
        """SIGKILL every process left in the group but the agent (a step's daemons included:
        what escaped its process group cannot escape its cgroup), until none is left or
        `timeout`."""
        deadline = time.monotonic() + timeout
        own = os.getpid()
        while True:
            left = [pid for pid in self.pids() if pid != own]
            if not left or time.monotonic() > deadline:
                return
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if reap is not None:
                reap()
            time.sleep(0.02)

    def remove(self) -> None:
        """Remove the (empty) group; best effort."""
        for _, path in self.dirs:
            _rmdir(path)


def limits_problem(*, parent: str = "") -> str:
    """'' when an agent running as this process's user, here, can give runs cgroups with
    their limits; else why not (for the backend's health). It makes and removes one."""
    if os.geteuid() != 0:
        return "the portal's agents are not root: they cannot make cgroups for runs"
    try:
        group = RunCgroup.create("probe", memory_bytes=0, cpus=0, processes=0, parent=parent)
    except (CgroupError, OSError) as exc:
        return str(exc)
    missing = [c for c in CONTROLLERS if c not in group.controllers]
    group.remove()
    return f"no {', '.join(missing)} controller for runs' cgroups" if missing else ""


def _make_parent(h: Hierarchy, base: str) -> None:
    """The runs' parent group, with the controllers handed down to its children (v2)."""
    os.makedirs(base, exist_ok=True)
    if h.version == 2:
        wanted = " ".join(f"+{c}" for c in h.controllers)
        top = os.path.dirname(base)
        if h.current != "/" and os.path.normpath(top) != os.path.normpath(h.mount):
            # the agent's parent: normally hands them down already (find_hierarchies read
            # them there); a delegated parent may need them switched on
            enabled = _read(os.path.join(top, "cgroup.subtree_control")).split()
            if not all(c in enabled for c in h.controllers):
                _write(os.path.join(top, "cgroup.subtree_control"), wanted)
        enabled = _read(os.path.join(base, "cgroup.subtree_control")).split()
        if not all(c in enabled for c in h.controllers):
            _write(os.path.join(base, "cgroup.subtree_control"), wanted)


def write_limits(
    h: Hierarchy, path: str, *, memory_bytes: int, cpus: float, processes: int
) -> None:
    """Write the limits into the group `path` of `h` (0: none of that kind)."""
    join = os.path.join
    if "memory" in h.controllers and memory_bytes > 0:
        if h.version == 1:
            _write(join(path, "memory.limit_in_bytes"), str(memory_bytes))
            if os.path.exists(join(path, "memory.memsw.limit_in_bytes")):  # no swap past it
                _write(join(path, "memory.memsw.limit_in_bytes"), str(memory_bytes))
        else:
            _write(join(path, "memory.max"), str(memory_bytes))
            if os.path.exists(join(path, "memory.swap.max")):
                _write(join(path, "memory.swap.max"), "0")
    if "cpu" in h.controllers and cpus > 0:
        quota = max(int((cpus + AGENT_CPU) * CFS_PERIOD_US), 1000)
        if h.version == 1:
            _write(join(path, "cpu.cfs_period_us"), str(CFS_PERIOD_US))
            _write(join(path, "cpu.cfs_quota_us"), str(quota))
        else:
            _write(join(path, "cpu.max"), f"{quota} {CFS_PERIOD_US}")
    if "pids" in h.controllers and processes > 0:
        _write(join(path, "pids.max"), str(processes))


def _sweep(base: str) -> None:
    """Remove the groups that agents which are gone (killed before they could) left empty:
    a group is named after its agent's pid (…-p<pid>), and only an empty one can go."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        head, sep, pid = name.rpartition("-p")
        if not sep or not pid.isdigit() or not head.startswith("run-"):
            continue
        if not os.path.exists(f"/proc/{pid}"):
            try:
                os.rmdir(os.path.join(base, name))
            except OSError:
                pass


def _rmdir(path: str) -> None:
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:  # EBUSY: a process not reaped yet
            time.sleep(0.02)
