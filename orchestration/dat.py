"""Follow function-object output (``postProcessing/<fo>/<startTime>/*.dat``) incrementally.

Stdlib only; ships with the agent. Each `poll()` reads what was appended since the last one
and returns ``(series, x, y)`` points: x is the first column, every other column is a
series ``<fo>.<column>`` (the function object's first file) or ``<fo>.<stem>.<column>``
(its other files). Vector values ``(1 2 3)`` become ``<column>_x|_y|_z``. Column names
come from the last ``#`` line before the data (v1912's forceCoeffs writes
``# Time <tab> Cd <tab> Cs …``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from orchestration.logparse import Point, parse_number, safe_series_name

__all__ = ["DatFollower", "split_columns"]

_MAX_READ = 4 * 1024 * 1024  # bytes per file per poll
_RESTART_SUFFIX = re.compile(r"_\d+(\.\d+)?(e[-+]?\d+)?$")  # coefficient_30.dat on restarts
_VECTOR_SUFFIXES = ("_x", "_y", "_z")


def split_columns(line: str) -> list[str]:
    """Split on whitespace outside parentheses: ``1 (2 3 4) 5`` → ``['1', '(2 3 4)', '5']``."""
    if "(" not in line:  # most lines: plain numbers
        return line.split()
    columns: list[str] = []
    depth, current = 0, []
    for char in line:
        if char.isspace() and depth == 0:
            if current:
                columns.append("".join(current))
                current = []
            continue
        depth += (char == "(") - (char == ")")
        current.append(char)
    if current:
        columns.append("".join(current))
    return columns


def _values(token: str) -> list[float]:
    if token[0] != "(":
        return [parse_number(token)]
    return [parse_number(part) for part in token.replace("(", " ").replace(")", " ").split()]


def _start_time(path: Path) -> float | None:
    try:
        return float(path.name)
    except ValueError:
        return None


@dataclass
class _File:
    path: Path
    prefix: str  # "<fo>." or "<fo>.<stem>."
    offset: int = 0
    pending: bytes = b""
    columns: list[str] = field(default_factory=list)  # series names, safe, from the header


class DatFollower:
    """Tail every ``.dat`` file under ``<case_dir>/postProcessing``, in start-time order."""

    def __init__(self, case_dir: Path) -> None:
        self.root = Path(case_dir) / "postProcessing"
        self._files: dict[Path, _File] = {}
        self._order: list[_File] = []
        self._primary: dict[str, str] = {}  # fo → stem of its first file

    def poll(self) -> list[Point]:
        """Points appended since the last poll (new files are picked up as they appear)."""
        self._discover()
        points: list[Point] = []
        for tracked in self._order:
            points.extend(self._read(tracked))
        return points

    # -- discovery ----------------------------------------------------------------------

    def _discover(self) -> None:
        if not self.root.is_dir():
            return
        added = False
        for fo_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            starts = [(t, p) for p in fo_dir.iterdir() if (t := _start_time(p)) is not None]
            for _, start_dir in sorted(starts):
                if not start_dir.is_dir():
                    continue
                for dat in sorted(start_dir.glob("*.dat")):
                    if dat not in self._files and dat.is_file():
                        self._track(fo_dir.name, start_dir, dat)
                        added = True
        if added:
            self._order.sort(key=self._sort_key)

    def _track(self, fo: str, start_dir: Path, dat: Path) -> None:
        stem = _RESTART_SUFFIX.sub("", dat.stem) or dat.stem
        primary = self._primary.setdefault(fo, stem)
        prefix = f"{fo}." if stem == primary else f"{fo}.{stem}."
        tracked = _File(path=dat, prefix=safe_series_name(prefix))
        self._files[dat] = tracked
        self._order.append(tracked)

    @staticmethod
    def _sort_key(tracked: _File) -> tuple[str, float, str]:
        start = _start_time(tracked.path.parent) or 0.0
        return (tracked.path.parent.parent.name, start, tracked.path.name)

    # -- reading ------------------------------------------------------------------------

    def _read(self, tracked: _File) -> list[Point]:
        try:
            size = tracked.path.stat().st_size
            if size < tracked.offset:  # truncated or replaced: start again
                tracked.offset, tracked.pending = 0, b""
            if size == tracked.offset:
                return []
            with tracked.path.open("rb") as fh:
                fh.seek(tracked.offset)
                chunk = fh.read(_MAX_READ)
        except OSError:
            return []
        tracked.offset += len(chunk)
        data = tracked.pending + chunk
        lines = data.split(b"\n")
        tracked.pending = lines.pop()  # a partial last line waits for its newline
        points: list[Point] = []
        for raw in lines:
            points.extend(self._parse_line(tracked, raw.decode("utf-8", "replace").strip()))
        return points

    def _parse_line(self, tracked: _File, line: str) -> list[Point]:
        if not line:
            return []
        if line.startswith("#"):
            header = split_columns(line.lstrip("#"))
            if header:
                tracked.columns = [safe_series_name(name) for name in header]
            return []
        tokens = split_columns(line)
        try:
            x = parse_number(tokens[0])
            values = [_values(token) for token in tokens[1:]]
        except (ValueError, IndexError):
            return []
        points: list[Point] = []
        for index, components in enumerate(values, start=1):
            name = tracked.columns[index] if index < len(tracked.columns) else f"col{index}"
            if len(components) == 1 and not tokens[index].startswith("("):
                points.append((tracked.prefix + name, x, components[0]))
                continue
            for i, y in enumerate(components):
                suffix = _VECTOR_SUFFIXES[i] if len(components) == 3 else f"_{i}"
                points.append((tracked.prefix + name + suffix, x, y))
        return points
