"""The local transport: the cluster's commands run on this machine (the portal is on a login
node, or on the test cluster's node). Files are written directly."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from orchestration.transports.base import CommandResult, FileSpec, TransportError

__all__ = ["LocalTransport"]

# What a Slurm command sees of the portal's environment: no database URLs, no secrets
# (sbatch exports the submitter's environment into the job by default).
_PASSED = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR")


class LocalTransport:
    remote = False

    def __init__(self, *, command_timeout: float = 60.0, env: Mapping[str, str] | None = None):
        self.command_timeout = command_timeout
        self.env = dict(env or {})
        self.key = "local"

    def _env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        env = {k: os.environ[k] for k in _PASSED if k in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env.update(self.env)
        env.update(extra or {})
        return env

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        try:
            proc = subprocess.run(
                list(argv),
                input=input if input is not None else b"",
                capture_output=True,
                timeout=timeout or self.command_timeout,
                env=self._env(env),
                close_fds=True,
            )
        except FileNotFoundError as exc:
            raise TransportError(f"{argv[0]}: command not found", retryable=False) from exc
        except subprocess.TimeoutExpired as exc:
            raise TransportError(
                f"{argv[0]} did not answer within {exc.timeout:g} s", retryable=True
            ) from exc
        except OSError as exc:
            raise TransportError(f"cannot run {argv[0]}: {exc}", retryable=True) from exc
        return CommandResult(
            proc.returncode,
            proc.stdout.decode("utf-8", "replace"),
            proc.stderr.decode("utf-8", "replace"),
        )

    def write_files(self, files: Sequence[FileSpec]) -> None:
        try:
            for spec in files:
                path = Path(spec.path)
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, spec.mode)
                with os.fdopen(fd, "wb") as fh:
                    os.fchmod(fh.fileno(), spec.mode)
                    fh.write(spec.data)
                os.replace(tmp, path)
        except OSError as exc:
            raise TransportError(f"cannot write {exc.filename}: {exc}", retryable=True) from exc

    def put_tree(self, local_dir: str, remote_dir: str) -> None:
        target = Path(remote_dir)
        if target.is_dir():
            return
        try:
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
            shutil.copytree(local_dir, tmp, symlinks=False, dirs_exist_ok=True)
            try:
                os.rename(tmp, target)
            except OSError:  # another worker staged it first
                shutil.rmtree(tmp, ignore_errors=True)
                if not target.is_dir():
                    raise
        except (OSError, shutil.Error) as exc:
            raise TransportError(f"cannot stage {local_dir}: {exc}", retryable=True) from exc

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def home(self) -> str:
        return os.path.expanduser("~")

    def close(self) -> None:
        return None
