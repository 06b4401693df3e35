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

from orchestration.agent.archive import archive_argv, read_notes
from orchestration.agent.sandbox import Sandbox, find_program

__all__ = ["ArchiveError", "archive_case"]

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
    try:
        proc = sandbox.start(
            argv,
            cwd=case,
            env={"PATH": SYSTEM_PATH, "LC_ALL": "C.UTF-8"},
            stdin=subprocess.DEVNULL,
            stdout=out_fd,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:
        raise ArchiveError(f"cannot start the archive step: {exc}") from exc
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise ArchiveError(f"the archive took longer than {timeout:.0f} s") from None
    notes = read_notes(stderr)
    if proc.returncode != 0 or notes is None:
        last = stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        raise ArchiveError(f"the archive step failed (exit {proc.returncode}): {last[0][:300]}")
    return notes


def case_owner(case: str) -> int | None:
    """The uid that owns the case directory (None: it is gone)."""
    try:
        return os.stat(case, follow_symlinks=False).st_uid
    except OSError:
        return None
