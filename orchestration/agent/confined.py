"""Work done in a run's case on the case's behalf, as the run's uid in the run's sandbox.

Whoever has more rights than the run (the agent as root, the portal) does not read the case
to make its result archive: the run's own uid does, in the run's sandbox, where the case's
links lead nowhere the run could not already go, and writes the archive to a file the caller
made and handed over as standard output (slurmstepd's way with a job's output). The caller
then has a regular file of its own, and opened nothing of the case.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping

from orchestration.agent.archive import archive_argv, read_notes
from orchestration.agent.sandbox import Sandbox, find_program
from orchestration.results.fields import fields_argv

__all__ = ["ArchiveError", "archive_case", "case_fields", "case_owner", "case_vtk"]

SYSTEM_PATH = "/usr/bin:/bin:/usr/local/bin"


class ArchiveError(OSError):
    """The archive step failed: the message says why."""


def archive_case(
    sandbox: Sandbox, *, case: str, out_fd: int, max_bytes: int, timeout: float
) -> list[str]:
    """Write the case's result archive (orchestration/agent/archive.py) to `out_fd`, made by
    the run's uid in its sandbox; return its notes (what it left out). ArchiveError when it
    fails or takes longer than `timeout` seconds."""
    python = find_program("python3", SYSTEM_PATH) or sys.executable
    argv = archive_argv(python, sandbox.tools_root(), max_bytes=max_bytes)
    stderr = _confined(
        sandbox, argv, case=case, out_fd=out_fd, env=_SYSTEM_ENV, timeout=timeout, what="archive"
    )
    notes = read_notes(stderr)
    if notes is None:
        raise ArchiveError(f"the archive step failed: {_last_line(stderr)}")
    return notes


def case_fields(
    sandbox: Sandbox, *, case: str, out_fd: int, extra_fields: tuple[str, ...], timeout: float
) -> str:
    """Write the case's flow-field artifact (orchestration/results/fields) to `out_fd`, made
    by the run's uid in its sandbox from the case's latest time; return what the converter
    said. ArchiveError when it fails (the message says why) or takes over `timeout` s."""
    python = find_program("python3", SYSTEM_PATH) or sys.executable
    argv = fields_argv(python, sandbox.tools_root(), extra_fields, out="-")
    stderr = _confined(
        sandbox, argv, case=case, out_fd=out_fd, env=_SYSTEM_ENV, timeout=timeout, what="fields"
    )
    return stderr.decode(errors="replace").strip()


def case_vtk(
    sandbox: Sandbox, *, case: str, env: Mapping[str, str], log_fd: int, timeout: float
) -> None:
    """foamToVTK -latestTime in the case, as the run's uid in its sandbox, with the run's step
    environment `env` (its OpenFOAM); its output to `log_fd`. ArchiveError when it fails."""
    program = find_program("foamToVTK", env.get("PATH", ""))
    if program is None:
        raise ArchiveError("foamToVTK is not installed for this run's OpenFOAM")
    _confined(
        sandbox,
        ["foamToVTK", "-latestTime"],
        case=case,
        out_fd=log_fd,
        env=dict(env),
        timeout=timeout,
        what="foamToVTK",
    )


_SYSTEM_ENV = {"PATH": SYSTEM_PATH, "LC_ALL": "C.UTF-8"}


def _confined(
    sandbox: Sandbox,
    argv: list[str],
    *,
    case: str,
    out_fd: int,
    env: Mapping[str, str],
    timeout: float,
    what: str,
) -> bytes:
    """Run `argv` in the case, confined, standard output to `out_fd`; its standard error.
    ArchiveError when it cannot start, fails or takes longer than `timeout` seconds."""
    try:
        proc = sandbox.start(
            argv,
            cwd=case,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out_fd,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:
        raise ArchiveError(f"cannot start the {what} step: {exc}") from exc
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise ArchiveError(f"the {what} step took longer than {timeout:.0f} s") from None
    if proc.returncode != 0:
        raise ArchiveError(f"the {what} step failed (exit {proc.returncode}): {_last_line(stderr)}")
    return stderr


def _last_line(stderr: bytes) -> str:
    lines = stderr.decode(errors="replace").strip().splitlines()
    return (lines[-1] if lines else "no message")[:300]


def case_owner(case: str) -> int | None:
    """The uid that owns the case directory (None: it is gone)."""
    try:
        return os.stat(case, follow_symlinks=False).st_uid
    except OSError:
        return None
