"""How a driver reaches a cluster: run a command (argv, never a shell line) and move files.

Two transports implement the same small Protocol: `LocalTransport` (the cluster's commands
are on this machine) and `SSHTransport` (a login node over SSH, files over SFTP). Drivers
build argv lists; the SSH transport quotes every word with `shlex.quote` for the remote
shell, so nothing a user wrote is ever interpreted by a shell.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar, runtime_checkable

from orchestration.backoff import backoff_delays
from orchestration.errors import DriverError

__all__ = [
    "CommandResult",
    "FileSpec",
    "Transport",
    "TransportError",
    "retry",
]

T = TypeVar("T")


class TransportError(DriverError):
    """The transport itself failed (cannot connect, host key refused, timeout)."""


@dataclasses.dataclass(frozen=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def error_text(self) -> str:
        text = (self.stderr or self.stdout).strip()
        return text.splitlines()[-1] if text else f"exit code {self.returncode}"


@dataclasses.dataclass(frozen=True)
class FileSpec:
    """A file to write on the cluster: absolute path, content, mode."""

    path: str
    data: bytes
    mode: int = 0o600


@runtime_checkable
class Transport(Protocol):
    key: str  # identifies the cluster endpoint (for caches shared between driver objects)
    remote: bool

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run argv on the cluster side; a non-zero exit is a result, not an error."""
        ...

    def write_files(self, files: Sequence[FileSpec]) -> None:
        """Write files (creating parent directories, mode 0700) in one go."""
        ...

    def put_tree(self, local_dir: str, remote_dir: str) -> None:
        """Copy a directory tree to `remote_dir`, which appears complete or not at all."""
        ...

    def exists(self, path: str) -> bool: ...

    def home(self) -> str:
        """The cluster user's home directory (to resolve relative work roots)."""
        ...

    def close(self) -> None: ...


def retry(
    fn: Callable[[], T],
    *,
    retries: int,
    retry_if: Callable[[Exception], bool],
    base: float = 0.25,
    cap: float = 8.0,
    deadline: float | None = None,
) -> T:
    """Call fn; on an exception for which retry_if holds, wait and try again."""
    delays = backoff_delays(retries, base=base, cap=cap)
    while True:
        try:
            return fn()
        except Exception as exc:
            if not delays or not retry_if(exc):
                raise
            delay = delays.pop(0)
            if deadline is not None and time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
