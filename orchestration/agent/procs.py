"""Process groups: start, sample (CPU/RSS of the tree) and stop.

Linux's /proc directly (a few small reads per sample, and no psutil import in every Slurm
job's agent); psutil only where there is no /proc.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable

from orchestration.environment import WRITE_NOW_SIGNAL

TYPE_CHECKING = False  # typing is not imported at run time (every Slurm job starts an agent)
if TYPE_CHECKING:
    from typing import Protocol

    import psutil as psutil_types

    class _Psutil(Protocol):
        """What this module uses of the psutil module."""

        Process: type[psutil_types.Process]
        Error: type[psutil_types.Error]

        @property
        def STATUS_ZOMBIE(self) -> str: ...


HAVE_PROC = os.path.exists("/proc/self/stat")
psutil: _Psutil | None = None
if not HAVE_PROC:  # pragma: no cover - not Linux
    try:
        import psutil as _psutil
    except ImportError:
        pass
    else:
        psutil = _psutil

__all__ = ["TreeSampler", "group_alive", "kill_group", "kill_uid", "tree_pids"]

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def _proc_stat(pid: int) -> tuple[int, int, int, int] | None:
    """(ppid, pgid, cpu ticks, rss pages) from /proc/<pid>/stat."""
    try:
        raw = _read(f"/proc/{pid}/stat")
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()
    # fields[0] is state; ppid=1, pgrp=2, utime=11, stime=12, rss=21
    return int(fields[1]), int(fields[2]), int(fields[11]) + int(fields[12]), int(fields[21])


def _high_water(pid: int) -> int | None:
    """The highest resident memory the process has had (VmHWM of /proc/<pid>/status), in
    bytes: exact for its life so far, however seldom it is read."""
    try:
        raw = _read(f"/proc/{pid}/status")
    except OSError:
        return None
    start = raw.find("VmHWM:")
    if start < 0:  # a kernel thread, or a zombie: no memory of its own
        return None
    try:
        return int(raw[start + 6 : raw.index("\n", start)].split()[0]) * 1024
    except (ValueError, IndexError):
        return None


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _children(pid: int) -> list[int] | None:
    """The children of `pid` from /proc/<pid>/task/<tid>/children (Linux 3.5+): a few small
    reads instead of a walk of the whole process table. None when the kernel lacks it."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    kids: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                kids.extend(int(k) for k in fh.read().split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended meanwhile
            return None
        except OSError:
            continue
    return kids


def tree_pids(root: int) -> list[int]:
    """`root` and all its descendants (empty when `root` is gone)."""
    if psutil is not None:
        try:
            proc = psutil.Process(root)
            return [root, *(child.pid for child in proc.children(recursive=True))]
        except psutil.Error:
            return []
    if not os.path.exists(f"/proc/{root}"):
        return []
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        kids = _children(pid)
        if kids is None:
            return _tree_pids_scan(root)
        found.append(pid)
        todo.extend(kids)
    return found


def _tree_pids_scan(root: int) -> list[int]:
    """The same from a walk of the whole process table (kernels without children files)."""
    parents: dict[int, list[int]] = {}
    for pid in _all_pids():
        info = _proc_stat(pid)
        if info:
            parents.setdefault(info[0], []).append(pid)
    if _proc_stat(root) is None:
        return []
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(parents.get(pid, []))
    return found


def group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs. A group of zombies only is not alive: once
    the agent is a subreaper, a killed solver's orphans are reparented to it and wait there
    to be reaped, which `killpg(pgid, 0)` alone counts as alive."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc/self"):
        return True  # no /proc to tell zombies apart: the signal's answer
    for pid in _all_pids():
        try:
            raw = _read(f"/proc/{pid}/stat")
        except OSError:
            continue
        fields = raw[raw.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _signal_pids(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


_NOT_ASKED = ("bwrap",)  # the sandbox's own process: the signal would end it, and the step


def write_now(proc: subprocess.Popen[bytes], *, wait: float) -> bool:
    """Ask the step's processes (not the sandbox's) to write their time step and end (an MPI
    launcher passes it on to its ranks too); wait up to `wait` seconds: whether it ended."""
    pids = [pid for pid in tree_pids(proc.pid) if _comm(pid) not in _NOT_ASKED]
    _signal_pids(pids, WRITE_NOW_SIGNAL)
    deadline = time.monotonic() + wait
    while proc.poll() is None and time.monotonic() < deadline:
        wait_exit(proc, min(0.2, max(deadline - time.monotonic(), 0.0)))
    return proc.poll() is not None


def _comm(pid: int) -> str:
    try:
        return _read(f"/proc/{pid}/comm").strip()
    except OSError:
        return ""


def kill_group(
    pgid: int,
    *,
    grace: float,
    extra_pids: list[int] | None = None,
    reap: Callable[[], object] | None = None,
) -> None:
    """SIGTERM (and SIGCONT, for a stopped process) the group and `extra_pids`, descendants
    that left it; SIGKILL after `grace`.

    `reap` (e.g. ``popen.poll``) is called while waiting so our own child does not linger
    as a zombie that keeps the group "alive".
    """
    extra = list(extra_pids or [])
    for sig in (signal.SIGTERM, signal.SIGCONT):  # a stopped process takes SIGTERM once woken
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        _signal_pids(extra, sig)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if reap is not None:
            reap()
        if not group_alive(pgid) and not _any_alive(extra):
            return
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _signal_pids(extra, signal.SIGKILL)


def alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (dead, waiting to be reaped)."""
    if psutil is not None:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False
    try:
        state = _read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _any_alive(pids: list[int]) -> bool:
    return any(alive(pid) for pid in pids)


_PR_SET_CHILD_SUBREAPER = 36


def uid_pids(uid: int) -> list[int]:
    """The processes whose real or effective uid is `uid`."""
    out = []
    for pid in _all_pids():
        try:
            for line in _read(f"/proc/{pid}/status").splitlines():
                if line.startswith("Uid:"):
                    real, effective = line.split()[1:3]
                    if int(real) == uid or int(effective) == uid:
                        out.append(pid)
                    break
        except (OSError, ValueError, IndexError):
            continue
    return out


def kill_uid(uid: int, *, timeout: float = 5.0) -> None:
    """SIGKILL every process of `uid` (a uid of one run's own, on a machine of its own)
    until none is left or `timeout`."""
    if uid == 0 or not HAVE_PROC:
        return
    deadline = time.monotonic() + timeout
    while (pids := uid_pids(uid)) and time.monotonic() < deadline:
        _signal_pids(pids, signal.SIGKILL)
        time.sleep(0.02)


def become_subreaper() -> bool:
    """Adopt the orphans of our children (Linux prctl). bubblewrap's outer process exits
    without waiting for its PID namespace's init, which has reaped the step: reaping that
    init ourselves (reap_orphans) is what brings the step's CPU time into RUSAGE_CHILDREN."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def reap_orphans(*, timeout: float) -> int:
    """Reap the children left once the step's own process has been waited for (the
    sandbox's namespace init, on its way out); at most `timeout` seconds. Only called while
    no other child of ours runs: it would take that child's exit status."""
    reaped = 0
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid:
            reaped += 1
            continue
        if time.monotonic() >= deadline:
            return reaped
        time.sleep(0.005)


class TreeSampler:
    """CPU % (summed over processes, 100 = one core) and RSS bytes of a process tree, and
    the tree's peak memory over every sample (`peak_bytes`).

    The peak is the sum over the tree's processes of each one's own high-water mark
    (VmHWM), the largest such sum any sample saw: a process's peak between two samples is
    not missed, and for one solver process (or MPI ranks that peak together, as they do)
    it is the tree's true peak. Processes that peaked apart count as if together: an
    estimate from above, never from below, for the processes a sample saw."""

    RESCAN = 5.0  # seconds between walks of the process table for new descendants

    def __init__(self) -> None:
        self._procs: dict[int, psutil_types.Process] = {}  # they keep cpu_percent state
        self._ticks: dict[int, int] = {}
        self._last = time.monotonic()
        self._tree: tuple[int, float, list[int]] = (0, 0.0, [])  # root, when, pids
        self.peak_bytes = 0

    def sample(self, root: int) -> tuple[float, int]:
        return self._sample_psutil(root, psutil) if psutil is not None else self._sample_proc(root)

    def _pids(self, root: int) -> list[int]:
        """The tree's pids; the process table is walked again only every RESCAN seconds (and
        at once for a new root): the walk reads every /proc entry, the tree rarely changes."""
        known_root, when, pids = self._tree
        now = time.monotonic()
        if known_root != root or now - when >= self.RESCAN or not pids:
            pids = tree_pids(root)
            self._tree = (root, now, pids)
        return pids

    def _sample_psutil(self, root: int, ps: _Psutil) -> tuple[float, int]:
        cpu, rss = 0.0, 0
        current = {}
        for pid in self._pids(root):
            try:
                proc = self._procs.get(pid) or ps.Process(pid)
                with proc.oneshot():
                    cpu += proc.cpu_percent(None)  # 0.0 on the first call for a process
                    rss += proc.memory_info().rss
                current[pid] = proc
            except ps.Error:
                continue
        self._procs = current
        self.peak_bytes = max(self.peak_bytes, rss)
        return cpu, rss

    def _sample_proc(self, root: int) -> tuple[float, int]:
        now = time.monotonic()
        elapsed = max(now - self._last, 1e-6)
        self._last = now
        cpu_ticks, rss, high = 0, 0, 0
        ticks: dict[int, int] = {}
        for pid in tree_pids(root):
            info = _proc_stat(pid)
            if info is None:
                continue
            ticks[pid] = info[2]
            cpu_ticks += info[2] - self._ticks.get(pid, info[2])
            rss += info[3] * _PAGE
            high += _high_water(pid) or info[3] * _PAGE
        self._ticks = ticks
        self.peak_bytes = max(self.peak_bytes, high, rss)
        return 100.0 * cpu_ticks / _CLK_TCK / elapsed, rss


def describe_exit(name: str, code: int) -> str:
    """What ended a step, as its log and the run's reason say it. A step in the sandbox that
    a signal killed exits 128 + the signal (bubblewrap and shells report it so)."""
    signum = -code if code < 0 else code - 128 if 128 < code < 160 else 0
    if signum:
        try:
            signame = signal.Signals(signum).name
        except ValueError:
            signame = f"signal {signum}"
        return f"{name} was killed by {signame}"
    return f"{name} exited with code {code}"


def wait_exit(proc: subprocess.Popen[bytes], timeout: float, wake: int | None = None) -> None:
    """Sleep up to `timeout`, waking as soon as `proc` exits (a short step is not rounded up
    to the poll interval), or `wake` (a file descriptor) is readable."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (old kernel) or already reaped
        if wake is None:
            time.sleep(timeout)
        else:
            select.select([wake], [], [], timeout)
        return
    try:
        select.select([fd] if wake is None else [fd, wake], [], [], timeout)
    finally:
        os.close(fd)
