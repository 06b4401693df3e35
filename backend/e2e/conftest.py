"""The e2e tests' `windtunnel` command line: the installed command as a subprocess, with a
live stack's address and a tenant's token (the `cli` fixture)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WINDTUNNEL = ROOT / ".venv" / "bin" / "windtunnel"


@dataclasses.dataclass
class Cli:
    """`windtunnel …` with this test's environment."""

    env: dict[str, str]
    cwd: Path

    def __call__(self, *args: str, input: str | None = None, **env: str):
        done = subprocess.run(
            [str(WINDTUNNEL), *args],
            env={**self.env, **env},
            cwd=self.cwd,
            input=input,
            capture_output=True,
            text=True,
            timeout=1800,  # a safety net for a hung command, not a limit on the solver
        )
        return done

    def json(self, *args: str, **env: str):
        done = self(*args, "--json", **env)
        assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
        return json.loads(done.stdout)


@pytest.fixture
def cli(live, tmp_path):
    env = {
        **os.environ,
        "WINDTUNNEL_URL": live.stack.url,
        "WINDTUNNEL_TOKEN": live.token,
        "WINDTUNNEL_CONFIG": str(tmp_path / "config" / "config.toml"),
        "COLUMNS": "200",  # rich lays out tables for this width, not a pipe's 80
        "NO_COLOR": "1",
    }
    env.pop("WINDTUNNEL_PROFILE", None)
    return Cli(env=env, cwd=tmp_path)
