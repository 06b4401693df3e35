"""The committed results file, bench/results.json: one entry per figure, the latest full-size
measurement of each, from which scripts/render_docs.py renders docs/benchmarks.md's table.

Each entry: value, unit, target, meets, command, date, commit, machine and the measurement's
context. A write takes a lock (benchmarks may run side by side) and replaces the file in one
rename, so a reader never sees half of it and a crash mid-write loses nothing.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.figures import FIGURES

ROOT = Path(__file__).resolve().parents[1]
RESULTS_FILE = ROOT / "bench" / "results.json"


def machine() -> str:
    """This machine as the results page names it: system, cores, memory (e.g. "Debian 12,
    2 cores, 24 GB")."""
    release: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            key, _, value = line.partition("=")
            release[key] = value.strip('"')
    system = " ".join(
        x for x in (release.get("NAME", "Linux").split()[0], release.get("VERSION_ID", "")) if x
    )
    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    return f"{system}, {os.cpu_count()} cores, {memory_gb:.0f} GB"


def commit() -> str:
    """The checkout's commit (short hash), with "+changes" when tracked files differ from it:
    a figure measured on uncommitted code says so."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
        ).stdout.strip()

    head = git("rev-parse", "--short=7", "HEAD") or "unknown"
    changed = [
        line
        for line in git("status", "--porcelain", "--untracked-files=no").splitlines()
        if not line.endswith(str(RESULTS_FILE.relative_to(ROOT)))
    ]
    return f"{head}+changes" if changed else head


def entry(*, name: str, value: float, unit: str, context: str) -> dict[str, Any]:
    """The results file's entry for a measurement made now on this machine and checkout."""
    figure = FIGURES.get(name)
    target = figure.target if figure else None
    return {
        "value": float(f"{value:.4g}") if isinstance(value, float) else value,
        "unit": unit,
        "target": str(target) if target else None,
        "meets": target.met_by(value) if target else None,
        "command": figure.command if figure else "",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "commit": commit(),
        "machine": machine(),
        "context": context,
    }


def load(path: Path = RESULTS_FILE) -> dict[str, dict[str, Any]]:
    """Figure name → its latest entry ({} when nothing was recorded yet)."""
    try:
        return dict(json.loads(path.read_text()))
    except FileNotFoundError:
        return {}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    lock = path.parent / "results" / f".{path.name}.lock"  # bench/results/ is not committed
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def dumps(results: dict[str, dict[str, Any]]) -> str:
    """The file's text: figures in name order, one field a line (small, readable diffs)."""
    return json.dumps(dict(sorted(results.items())), indent=2, ensure_ascii=False) + "\n"


def record(name: str, measured: dict[str, Any], path: Path = RESULTS_FILE) -> None:
    """Keep `measured` as the latest entry of figure `name`, replacing the file atomically."""
    with _locked(path):
        results = load(path)
        results[name] = measured
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "w") as out:
                out.write(dumps(results))
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temporary, 0o644)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise
