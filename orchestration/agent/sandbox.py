"""The sandbox every step of a tenant's case runs in (stdlib only: the run agent imports it).

A case is the tenant's own code: OpenFOAM loads the shared libraries its controlDict names
(`libs`), and a solver reads whatever files its dictionaries point at. So no step runs as
root, nor with a view of the host. What a step gets depends on the backend's `sandbox` trait
(orchestration/drivers/base.py) and the portal's WINDTUNNEL_CASE_SANDBOX setting; the mode
arrives in run.json:

- `bwrap` (local and Slurm runs): bubblewrap puts the step into new user, mount, PID, IPC,
  UTS and network namespaces. It sees a read-only system (/usr, /etc, /opt and the /bin,
  /lib… links), a fresh /dev, /proc and /tmp, its case directory writable at /case and its
  own home at /home/windtunnel, and nothing else: not the portal's data, not other runs, not
  the agent's run.json and token. No network unless the run spans nodes (MPI across hosts).
- `uid` (container and VM runs, whose runtime or VM already gives the run a filesystem of
  its own): the step runs under an unprivileged uid with the limits below.
- `off`: as the agent itself (a deployment whose users are all trusted, explicitly).

In `bwrap` and `uid` modes an agent running as root drops to an unprivileged uid of the run's
own (SANDBOX_UID_BASE + a hash of the run id) with no supplementary groups and no new
privileges, after giving that uid the case directory and home. An agent that is not root
stays its own uid (bubblewrap maps it into the user namespace), and the mount namespace hides
the portal's files from the step. Resource limits (setrlimit through `prlimit`): address
space, CPU time, file size, and, under a uid of the run's own, the number of processes.

In `bwrap` mode every step also runs under a seccomp filter (orchestration/agent/seccomp.py:
no new user namespaces, no mount, keyctl, bpf, perf_event_open, ptrace, …), and an agent
running as root puts each run in a cgroup of its own with the kernel enforcing its memory,
cores and processes (orchestration/agent/cgroups.py; where no cgroup can be had, the run
goes on without and says so: `cgroup_problem`).
"""

from __future__ import annotations

import os
import subprocess
import zlib

from orchestration.agent.cgroups import CgroupError, RunCgroup

TYPE_CHECKING = False  # typing is not imported at run time (every Slurm job starts an agent)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = [
    "CASE_MOUNT",
    "HOME_MOUNT",
    "SOURCE_MOUNT",
    "TOOLS_MOUNT",
    "MODES",
    "SANDBOX_UID_BASE",
    "Sandbox",
    "SandboxError",
    "find_program",
    "warm_up",
]

MODES = ("bwrap", "uid", "off")
SANDBOX_UID_BASE = 2_000_000  # far above login users and the usual subuid ranges
SANDBOX_UID_SPAN = 1_000_000
CASE_MOUNT = "/case"
HOME_MOUNT = "/home/windtunnel"
# where a step sees another run's case it may read (a warm start mapped from another mesh)
SOURCE_MOUNT = "/source"
# where a step sees the agent's own code (read-only), for the tools the agent runs in the
# sandbox on the case's behalf (the result archive): the folder holding `orchestration/`
TOOLS_MOUNT = "/windtunnel"
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the read-only system a step sees (those that exist; symlinks are recreated as links)
SYSTEM_PATHS = ("/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
DEFAULT_LIMITS = {
    "address_space_gb": 0,  # 0: none (MPI and OpenFOAM map far more than they use)
    "cpu_hours": 0,  # 0: none (the run's wall-clock limit ends it)
    "file_size_gb": 64,
    "processes": 1024,
    "memory_gb": 0,  # 0: none; the run's memory_gb, enforced by its cgroup
    "cpus": 0,  # 0: none; the run's cores, as a CFS quota of its cgroup
    "disk_gb": 0,  # 0: none; what the run's directory may take (the agent watches it)
}


def find_program(name: str, path: str | None = None) -> str | None:
    """The executable `name` on `path` (the agent's PATH by default), or None (a `which`
    of our own: the agent's start-up imports are measured, and shutil's are many)."""
    for folder in (path if path is not None else os.environ.get("PATH", "")).split(os.pathsep):
        candidate = os.path.join(folder or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


class SandboxError(Exception):
    """The sandbox cannot be set up here: the run fails with this message."""


def _seccomp_filter() -> str:
    """The compiled seccomp filter's path (bwrap mode); SandboxError when there is none."""
    try:
        from orchestration.agent import seccomp  # lazy: bwrap mode only; images leave it out
    except ImportError as exc:  # an image's agent (its runs are in "uid" mode)
        raise SandboxError(f"the bwrap sandbox needs its seccomp filter: {exc}") from exc
    try:
        return seccomp.filter_file()
    except seccomp.SeccompError as exc:
        raise SandboxError(str(exc)) from exc


# (as root, with the network) for which bubblewrap was seen to start here by this process or
# the fork server it was forked from (warm_up): each agent need not start it once more
_STARTS: set[tuple[bool, bool]] = set()


def warm_up() -> None:
    """Start bubblewrap once, in a scratch case of its own (a fork server does this before it
    forks agents): the agents forked later skip their probe, a few milliseconds of CPU each.
    Quiet: where it fails, each agent probes and says why."""
    import shutil
    import tempfile

    top = tempfile.mkdtemp(prefix="windtunnel-probe-")
    try:
        os.makedirs(os.path.join(top, "case"))
        Sandbox({"mode": "bwrap"}, run_id="probe").prepare(
            case=os.path.join(top, "case"), home=os.path.join(top, "home")
        )
    except (SandboxError, OSError):
        pass
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _limit(limits: Mapping[str, Any], key: str) -> float:
    value = limits.get(key, DEFAULT_LIMITS[key])
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e12:
        raise SandboxError(f"run.json: sandbox limit {key!r} must be a number ≥ 0")
    return float(value)


def _int_limit(limits: Mapping[str, Any], key: str) -> int:
    return int(_limit(limits, key))


class Sandbox:
    """How the steps of one run are started: `prepare` once, then `command` per step."""

    def __init__(
        self, config: Mapping[str, Any] | None, *, run_id: str, uid: int | None = None
    ) -> None:
        config = config or {}
        mode = config.get("mode", "bwrap")
        if mode not in MODES:
            raise SandboxError(f"run.json: sandbox mode {mode!r} is not one of {', '.join(MODES)}")
        self.mode: str = mode
        self.network = config.get("network") is True
        limits = config.get("limits") or {}
        self.address_space = _int_limit(limits, "address_space_gb") * 1024**3
        self.cpu_seconds = _int_limit(limits, "cpu_hours") * 3600
        self.file_size = _int_limit(limits, "file_size_gb") * 1024**3
        self.processes = _int_limit(limits, "processes")
        self.memory_bytes = int(_limit(limits, "memory_gb") * 1024**3)
        self.cpus = _limit(limits, "cpus")
        self.disk_bytes = int(_limit(limits, "disk_gb") * 1024**3)
        parent = config.get("cgroup_parent") or ""
        if not isinstance(parent, str) or parent and (parent[0] != "/" or ".." in parent):
            raise SandboxError(
                "run.json: sandbox cgroup_parent must be a group's path in the cgroup "
                "hierarchies, such as /system.slice/windtunnel.service"
            )
        self.cgroup_parent = parent
        self.cgroup: RunCgroup | None = None
        # why the run has no cgroup ('' when it has one, or is not confined at all)
        self.cgroup_problem = ""
        self._filter = ""  # the compiled seccomp filter (bwrap mode)
        self.as_root = os.geteuid() == 0
        self.uid: int | None = None
        if self.mode != "off" and self.as_root:
            self.uid = uid or SANDBOX_UID_BASE + zlib.crc32(run_id.encode()) % SANDBOX_UID_SPAN
        self._case = ""
        self._home = ""
        self._source = ""
        self.writable_home = False

    @property
    def confines_files(self) -> bool:
        """Whether a step sees only its case and home (the paths it is told are the mounts)."""
        return self.mode == "bwrap"

    def case_dir(self, host_path: str) -> str:
        """Where a step finds its case directory."""
        return CASE_MOUNT if self.confines_files else host_path

    def home_dir(self, host_path: str) -> str:
        return HOME_MOUNT if self.confines_files else host_path

    def add_source(self, host_path: str) -> str:
        """Let the steps read another run's case (the same study's, on this backend: a warm
        start mapped from its mesh), read-only; the path a step finds it at."""
        if not self.confines_files:
            return host_path
        self._source = host_path
        return SOURCE_MOUNT

    def prepare(
        self,
        *,
        case: str,
        home: str,
        writable_home: bool = False,
        mounts: Mapping[str, str] | None = None,
    ) -> None:
        """Check the tools, and give the run's uid its case directory (and its home when
        `writable_home`: a trusted deployment's cases compile code there). The home is
        otherwise the agent's: its .OpenFOAM/controlDict keeps system operations off. The
        rest of the run's directory (run.json and its token) is closed to the run's uid.
        `mounts` (uid mode: what the container runtime mounted for the run, {path: host
        path[:ro]}): the run's uid gets each writable one that is empty (its scratch)."""
        self._case, self._home = case, home
        if self.mode == "off":
            return
        os.makedirs(home, exist_ok=True)
        missing = [
            tool
            for tool in (("bwrap",) if self.mode == "bwrap" else ()) + ("prlimit", "choom")
            if find_program(tool) is None
        ]
        if self.as_root and find_program("setpriv") is None:
            missing.append("setpriv")
        if missing:
            raise SandboxError(
                f"the case sandbox needs {', '.join(missing)} on this host "
                "(Debian: apt-get install bubblewrap util-linux); a deployment whose users "
                "are all trusted may set WINDTUNNEL_CASE_SANDBOX=off instead"
            )
        self.writable_home = writable_home
        if self.uid is not None:
            for top in (case, home) if writable_home else (case,):
                _chown_tree(top, self.uid)
            _close_siblings(os.path.dirname(os.path.abspath(case)), keep=(case, home))
            if self.mode == "uid":
                # the run's own machine or container: the uid must reach its case by path
                # (search permission on the folders above it, not the right to list them)
                _searchable(os.path.dirname(os.path.abspath(case)))
                for path, source in (mounts or {}).items():
                    # a fresh (empty) folder of the run's: a shared one stays its owner's
                    if not source.endswith(":ro") and os.path.isdir(path) and not os.listdir(path):
                        os.chown(path, self.uid, self.uid)
        if self.mode == "bwrap":
            self._filter = _seccomp_filter()
            self._probe()

    def attach(self, *, case: str, home: str = "") -> None:
        """Start steps for a case prepared before (by the agent that ran it): the portal
        archiving a finished run as its uid, in its sandbox (no home: the step sees none).
        Changes nothing on disk."""
        self._case, self._home = case, home
        if self.mode == "bwrap":
            self._filter = _seccomp_filter()

    def make_cgroup(self, name: str) -> None:
        """The run's cgroup, with its memory, cores and processes (an agent as root, in a
        confining mode), the agent in it from now on (RunCgroup.enter), so every step starts
        in it. Where none can be had, `cgroup_problem` says why and steps run with the
        per-process limits only."""
        if self.mode == "off":
            return
        if not self.as_root:
            self.cgroup_problem = "the agent is not root: it cannot make the run's cgroup"
            return
        try:
            self.cgroup = RunCgroup.create(
                name,
                memory_bytes=self.memory_bytes,
                cpus=self.cpus,
                processes=self.processes,
                parent=self.cgroup_parent,
            )
            self.cgroup.enter()
        except (CgroupError, OSError) as exc:
            if self.cgroup is not None:
                self.cgroup.leave()
                self.cgroup.remove()
                self.cgroup = None
            self.cgroup_problem = str(exc)

    def start(self, argv: list[str], **popen: Any) -> subprocess.Popen[bytes]:
        """Start `argv` confined (`command`); `popen`: subprocess.Popen's other arguments."""
        fd = -1
        if self._filter:
            fd = os.open(self._filter, os.O_RDONLY | os.O_CLOEXEC)  # bwrap reads it whole
            popen["pass_fds"] = (*popen.get("pass_fds", ()), fd)
        try:
            command = self.command(argv, seccomp_fd=fd)
            # (in the run's cgroup when it has one: the agent is in it, and the step with it)
            return subprocess.Popen(command, **popen)
        finally:
            if fd >= 0:
                os.close(fd)

    def _probe(self) -> None:
        """bubblewrap can make its namespaces here (user namespaces may be disabled): once
        per process (and its forks) for each way it starts."""
        key = (self.as_root, self.network)
        if key in _STARTS:
            return
        try:
            proc = self.start(
                ["true"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={"PATH": os.environ.get("PATH", "")},
            )
            _, stderr = proc.communicate(timeout=30)
            done = subprocess.CompletedProcess(proc.args, proc.returncode, b"", stderr)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxError(f"the case sandbox cannot start: {exc}") from exc
        if done.returncode != 0:
            detail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
            raise SandboxError(
                f"the case sandbox cannot start on this host ({detail[0]}); bubblewrap needs "
                "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
                "user.max_user_namespaces > 0)"
            )
        _STARTS.add(key)

    def command(self, argv: list[str], *, seccomp_fd: int = -1) -> list[str]:
        """The argv that runs `argv` in the sandbox, from the case directory (`start` runs
        it: with the seccomp filter's descriptor, `seccomp_fd`, and in the run's cgroup).

        As root: bubblewrap makes the namespaces (no user namespace: root may), mounts what
        the step sees, then setpriv drops to the run's uid with no capabilities left and no
        way to gain any. Not root: bubblewrap in a user namespace of the agent's own uid,
        which may make no other (--disable-userns)."""
        if self.mode == "off":
            return list(argv)
        limits = [f"--fsize={self.file_size}"] if self.file_size else []
        if self.address_space:
            limits.append(f"--as={self.address_space}")
        if self.cpu_seconds:
            limits.append(f"--cpu={self.cpu_seconds}")
        if self.processes and self.uid is not None:  # counted per uid: only a uid of its own
            limits.append(f"--nproc={self.processes}")
        confined = ["prlimit", *limits, "--", *argv]
        if self.cgroup is not None:
            # the OOM killer's first choice in the run's cgroup, which the agent shares: a run
            # over its memory loses a step, never the agent that reports it (choom: util-linux)
            confined = ["choom", "-n", "1000", "--", *confined]
        if self.uid is not None:
            uid = str(self.uid)
            confined = [
                "setpriv",
                f"--reuid={uid}",
                f"--regid={uid}",
                "--clear-groups",
                "--no-new-privs",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--",
                *confined,
            ]
        if self.mode == "uid":
            return confined
        return [*self._bwrap(seccomp_fd), *confined]

    def tools_root(self) -> str:
        """Where a step finds the folder holding the agent's `orchestration` package."""
        return TOOLS_MOUNT if self.confines_files else PACKAGE_ROOT

    def _bwrap(self, seccomp_fd: int) -> list[str]:
        argv = ["bwrap", "--die-with-parent"]
        if seccomp_fd >= 0:
            argv += ["--seccomp", str(seccomp_fd)]
        if self.as_root:
            argv += ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
            if not self.network:
                argv.append("--unshare-net")
        else:
            argv += ["--unshare-all", "--unshare-user", "--disable-userns"]
            if self.network:
                argv.append("--share-net")
        for path in SYSTEM_PATHS:
            if os.path.islink(path):
                argv += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                argv += ["--ro-bind", path, path]
        if self.network:  # MPI across nodes: the resolver's and Slurm's sockets
            for path in ("/run/munge", "/run/systemd/resolve"):
                argv += ["--ro-bind-try", path, path]
        # /sys read-only: MPI's hwloc reads the CPU topology there
        argv += ["--proc", "/proc", "--dev", "/dev", "--ro-bind", "/sys", "/sys"]
        for path in ("/tmp", "/var/tmp", "/dev/shm"):
            argv += ["--perms", "1777", "--tmpfs", path]
        home_bind = "--bind" if self.writable_home else "--ro-bind"
        # (a directory bubblewrap makes is root's and closed: /home is made open first, or
        # the run's uid could not reach its home, nor the switch there that keeps system
        # operations off)
        argv += ["--bind", self._case, CASE_MOUNT, "--perms", "0755", "--dir", "/home"]
        if self._home:
            argv += [home_bind, self._home, HOME_MOUNT]
        if self._source:
            argv += ["--ro-bind", self._source, SOURCE_MOUNT]
        argv += ["--perms", "0755", "--dir", TOOLS_MOUNT]
        argv += ["--ro-bind", os.path.join(PACKAGE_ROOT, "orchestration")]
        argv += [os.path.join(TOOLS_MOUNT, "orchestration")]
        argv += ["--hostname", "windtunnel", "--chdir", CASE_MOUNT]
        argv += ["--setenv", "HOME", HOME_MOUNT, "--setenv", "TMPDIR", "/tmp"]
        argv += ["--setenv", "PWD", CASE_MOUNT, "--"]
        return argv


def _close_siblings(work_dir: str, *, keep: tuple[str, ...]) -> None:
    """The run's directory: the run's uid may pass through it to its case, and read nothing
    else there (run.json holds the agent's token)."""
    os.chmod(work_dir, 0o711)
    kept = {os.path.abspath(path) for path in keep}
    with os.scandir(work_dir) as entries:
        for entry in entries:
            if os.path.abspath(entry.path) not in kept and not entry.is_symlink():
                os.chmod(entry.path, 0o700 if entry.is_dir() else 0o600)


def _searchable(folder: str) -> None:
    while True:
        mode = os.stat(folder).st_mode
        if not mode & 0o001:
            os.chmod(folder, (mode & 0o7777) | 0o001)
        parent = os.path.dirname(folder)
        if parent == folder:
            return
        folder = parent


def _chown_tree(top: str, uid: int) -> None:
    os.chown(top, uid, uid, follow_symlinks=False)
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            os.chown(os.path.join(root, name), uid, uid, follow_symlinks=False)
