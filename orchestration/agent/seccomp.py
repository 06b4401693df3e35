"""The seccomp filter every step of a tenant's case runs under (bubblewrap's `--seccomp`).

Denied, with EPERM, what container runtimes deny by default and a solver never needs:
making user namespaces (`clone`/`unshare` with CLONE_NEWUSER; `clone3`, whose flags a filter
cannot read, answers ENOSYS so the C library falls back to `clone`), mounting and the new
mount API, `setns`, `pivot_root`, `chroot`, keyrings (`keyctl`, `add_key`,
`request_key`), `bpf`, `perf_event_open`, `ptrace` and `process_madvise`/`pidfd_getfd`/`kcmp`
on other processes, io_uring, `userfaultfd`, kernel modules, kexec, reboot, swap, clocks,
`open_by_handle_at`, `syslog`, `acct`, `quotactl`, host and domain names. Everything else
is allowed (an allow-list would break solvers and MPI with every new C library).

The filter is compiled with libseccomp's own Python bindings (Debian: python3-seccomp) into
a BPF program, once per host and filter version, and cached (`filter_file`):
`scripts/bootstrap` makes it at install time; an agent on a host where it is missing makes
it at its first run, with the system's python3. No bindings and no cache: the sandbox
cannot start, and says which package to install (it never runs a case without the filter).
"""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import sys

TYPE_CHECKING = False  # typing is not imported at run time (every Slurm job starts an agent)
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["DENIED", "SeccompError", "build", "filter_file", "main"]

CLONE_NEWUSER = 0x10000000
DENIED = (
    "acct", "add_key", "bpf", "chroot", "clock_adjtime", "clock_settime", "create_module",
    "delete_module", "fanotify_init", "finit_module", "fsconfig", "fsmount", "fsopen",
    "fspick", "get_kernel_syms", "init_module", "io_uring_enter", "io_uring_register",
    "io_uring_setup", "ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl",
    "lookup_dcookie", "mount", "mount_setattr", "move_mount", "name_to_handle_at",
    "nfsservctl", "open_by_handle_at", "open_tree", "perf_event_open", "pidfd_getfd",
    "pivot_root", "process_madvise", "ptrace", "query_module", "quotactl", "quotactl_fd",
    "reboot", "request_key", "setdomainname", "sethostname", "setns", "settimeofday",
    "swapoff", "swapon", "syslog", "umount", "umount2", "uselib", "userfaultfd", "ustat",
    "vhangup",
)  # fmt: skip
# raised whenever the rules change: a cached filter of another version is not used
FILTER_VERSION = "1"
SYSTEM_PYTHON = "/usr/bin:/bin:/usr/local/bin"


class SeccompError(Exception):
    """The filter cannot be had on this host: the sandbox refuses to start."""


def build(out_path: str) -> None:
    """Compile the filter for this machine's architecture into `out_path` (needs the
    `seccomp` module: libseccomp's bindings)."""
    import seccomp  # type: ignore[import-not-found]  # the system's python3-seccomp

    deny = seccomp.ERRNO(errno.EPERM)
    flt = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in DENIED:
        try:
            flt.add_rule(deny, name)
        except (RuntimeError, ValueError, OSError):  # not a system call of this architecture
            continue
    newuser = seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)
    flt.add_rule(deny, "unshare", newuser)
    flt.add_rule(deny, "clone", newuser)  # flags are clone's first argument on x86-64, arm64
    try:
        flt.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    except (RuntimeError, ValueError, OSError):
        pass
    tmp = f"{out_path}.{os.getpid()}.part"
    with open(tmp, "wb") as fh:
        flt.export_bpf(fh)
    os.chmod(tmp, 0o644)
    os.replace(tmp, out_path)


def _cache_dir() -> str:
    if os.geteuid() == 0:
        return "/var/cache/windtunnel"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "windtunnel")


def _name() -> str:
    with open(__file__, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()[:16]
    return f"seccomp-{os.uname().machine}-v{FILTER_VERSION}-{digest}.bpf"


def filter_file() -> str:
    """The compiled filter's path: the cached one, or made now (by this interpreter when it
    has the bindings, else by the system's python3). SeccompError when neither can."""
    folder = _cache_dir()
    path = os.path.join(folder, _name())
    if os.path.isfile(path) and os.path.getsize(path) > 0:
        return path
    try:
        os.makedirs(folder, mode=0o755, exist_ok=True)
    except OSError as exc:
        raise SeccompError(f"cannot make {folder} for the seccomp filter: {exc}") from exc
    try:
        build(path)
        return path
    except ImportError:
        pass
    except (OSError, RuntimeError) as exc:
        raise SeccompError(f"cannot compile the seccomp filter: {exc}") from exc
    for folder_ in SYSTEM_PYTHON.split(":"):
        python = os.path.join(folder_, "python3")
        if os.access(python, os.X_OK) and os.path.realpath(python) != os.path.realpath(
            sys.executable
        ):
            done = subprocess.run(
                [python, "-I", "-B", __file__, path], capture_output=True, timeout=60
            )
            if done.returncode == 0 and os.path.isfile(path):
                return path
            detail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
            raise SeccompError(
                "the sandbox's seccomp filter needs libseccomp's Python bindings "
                f"(Debian: apt-get install python3-seccomp): {detail[0]}"
            )
    raise SeccompError(
        "the sandbox's seccomp filter needs libseccomp's Python bindings "
        "(Debian: apt-get install python3-seccomp)"
    )


def main(argv: Sequence[str]) -> int:
    """`python3 seccomp.py OUT`: compile the filter into OUT; with no argument, into the
    cache, printing its path (scripts/bootstrap)."""
    try:
        if argv:
            build(argv[0])
            print(argv[0])
        else:
            print(filter_file())
    except ImportError:
        print("no module named seccomp: apt-get install python3-seccomp", file=sys.stderr)
        return 1
    except SeccompError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
