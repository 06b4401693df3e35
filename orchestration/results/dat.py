"""Follow function-object output (``postProcessing/<fo>/<startTime>/*.dat``) incrementally.

Stdlib only; ships with the agent. Each `poll_columns()` reads what was appended since the
last one and returns the new points as columns (``{series: ([x, …], [y, …])}``; `poll()` as
``(series, x, y)`` tuples): x is the first column, every other column is a
series ``<fo>.<column>`` (the function object's first file) or ``<fo>.<stem>.<column>``
(its other files). Vector values ``(1 2 3)`` become ``<column>_x|_y|_z``, or take the names of
a parenthesised header group (v1912's forces write ``# Time (total_x total_y total_z) …``:
``<fo>.total_x``). Column names come from the last ``#`` line before the data (v1912's
forceCoeffs writes ``# Time <tab> Cd <tab> Cs …``). `series_names` is the one place that
names a column's series: orchestration.case.caseinspect predicts a case's series with it.
"""

from __future__ import annotations

import os
import re

from orchestration import nofollow
from orchestration.results.logparse import Columns, Point, parse_number, safe_series_name

__all__ = ["DatFollower", "file_prefix", "series_names", "split_columns"]

_MAX_READ = 4 * 1024 * 1024  # bytes per file per poll
_RESTART_SUFFIX = re.compile(r"_\d+(\.\d+)?(e[-+]?\d+)?$")  # coefficient_30.dat on restarts
_VECTOR_SUFFIXES = ("_x", "_y", "_z")


def split_columns(line: str) -> list[str]:
    """Split on whitespace outside parentheses: ``1 (2 3 4) 5`` → ``['1', '(2 3 4)', '5']``."""
    if "(" not in line:  # most lines: plain numbers
        return line.split()
    columns: list[str] = []
    depth = 0
    current: list[str] = []
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


def file_prefix(fo: str, stem: str, primary: str) -> str:
    """The prefix of a function object's series: ``<fo>.`` for its first file (`primary`,
    by name), ``<fo>.<stem>.`` for its others; a restart's ``_<time>`` suffix dropped."""
    stem = _RESTART_SUFFIX.sub("", stem) or stem
    return safe_series_name(f"{fo}." if stem == primary else f"{fo}.{stem}.")


def series_names(prefix: str, header: str, size: int | None) -> list[str]:
    """The series of one column of a .dat file: `header` is its header token as written
    (``Cl``, ``areaAverage(U)``, ``(total_x total_y total_z)``), `size` the number of values
    of a parenthesised value ``(x y z)``, None for a plain number."""
    group = header[1:-1].split() if header.startswith("(") and header.endswith(")") else None
    if size is None:
        return [prefix + safe_series_name(header)]
    if group and len(group) == size:
        return [prefix + safe_series_name(name) for name in group]
    base = prefix + safe_series_name(header)
    if size == 3:
        return [base + suffix for suffix in _VECTOR_SUFFIXES]
    return [f"{base}_{i}" for i in range(size)]


def _values(token: str) -> list[float]:
    if token[0] != "(":
        return [parse_number(token)]
    return [parse_number(part) for part in token.replace("(", " ").replace(")", " ").split()]


def _start_time(name: str) -> float | None:
    try:
        return float(name)
    except ValueError:
        return None


def _entries(dir_fd: int, want_dir: bool) -> list[str]:
    """The folders (or regular files) of a folder, by descriptor, links left out."""
    try:
        with os.scandir(dir_fd) as entries:
            return [
                e.name
                for e in entries
                if (
                    e.is_dir(follow_symlinks=False)
                    if want_dir
                    else e.is_file(follow_symlinks=False)
                )
            ]
    except OSError:
        return []


class _File:
    """One followed file (a plain class: the agent does not import dataclasses)."""

    __slots__ = ("columns", "names", "offset", "path", "pending", "prefix", "sort_key")

    def __init__(self, *, path: str, fo: str, start: float, prefix: str) -> None:
        self.path = path
        self.sort_key = (fo, start, os.path.basename(path))
        self.prefix = prefix  # "<fo>." or "<fo>.<stem>."
        self.offset = 0
        self.pending = b""
        self.columns: list[str] = []  # header tokens, as written
        # full series names of a plain line's values by its number of columns (from columns)
        self.names: dict[int, list[str]] = {}

    def names_for(self, count: int) -> list[str]:
        names = self.names.get(count)
        if names is None:
            names = self.names[count] = [
                series_names(
                    self.prefix, self.columns[i] if i < len(self.columns) else f"col{i}", None
                )[0]
                for i in range(1, count)
            ]
        return names


class DatFollower:
    """Tail every ``.dat`` file under ``<case_dir>/postProcessing``, in start-time order.

    The case is the tenant's: its folders and files are opened by descriptor without
    following links (orchestration/nofollow.py), so a `.dat` that is a link to a host file
    (or a FIFO) is never read."""

    def __init__(self, case_dir: str | os.PathLike[str]) -> None:
        self.case_dir = os.fspath(case_dir)
        self._files: dict[str, _File] = {}
        self._order: list[_File] = []
        self._primary: dict[str, str] = {}  # fo → stem of its first file

    def poll(self) -> list[Point]:
        """Points appended since the last poll (new files are picked up as they appear)."""
        return [
            (name, x, y)
            for name, (xs, ys) in self.poll_columns().items()
            for x, y in zip(xs, ys, strict=True)
        ]

    def poll_columns(self) -> Columns:
        """As `poll()`, as columns."""
        out: Columns = {}
        try:
            case_fd = nofollow.open_dir(self.case_dir)
        except OSError:
            return out
        try:
            self._discover(case_fd)
            for tracked in self._order:
                self._read(case_fd, tracked, out)
        finally:
            os.close(case_fd)
        return out

    # -- discovery ----------------------------------------------------------------------

    def _discover(self, case_fd: int) -> None:
        try:
            root = nofollow.open_dir("postProcessing", dir_fd=case_fd)
        except OSError:
            return
        added = False
        try:
            for fo in sorted(_entries(root, True)):
                try:
                    fo_fd = nofollow.open_dir(fo, dir_fd=root)
                except OSError:
                    continue
                try:
                    added = self._discover_fo(fo, fo_fd) or added
                finally:
                    os.close(fo_fd)
        finally:
            os.close(root)
        if added:
            self._order.sort(key=lambda tracked: tracked.sort_key)

    def _discover_fo(self, fo: str, fo_fd: int) -> bool:
        added = False
        starts = [
            (t, name) for name in _entries(fo_fd, True) if (t := _start_time(name)) is not None
        ]
        for start, name in sorted(starts):
            try:
                start_fd = nofollow.open_dir(name, dir_fd=fo_fd)
            except OSError:
                continue
            try:
                dats = sorted(n for n in _entries(start_fd, False) if n.endswith(".dat"))
            finally:
                os.close(start_fd)
            for dat in dats:
                path = f"postProcessing/{fo}/{name}/{dat}"
                if path not in self._files:
                    self._track(fo, start, path)
                    added = True
        return added

    def _track(self, fo: str, start: float, path: str) -> None:
        stem = os.path.splitext(os.path.basename(path))[0]
        primary = self._primary.setdefault(fo, _RESTART_SUFFIX.sub("", stem) or stem)
        prefix = file_prefix(fo, stem, primary)
        tracked = _File(path=path, fo=fo, start=start, prefix=prefix)
        self._files[path] = tracked
        self._order.append(tracked)

    # -- reading ------------------------------------------------------------------------

    def _read(self, case_fd: int, tracked: _File, out: Columns) -> None:
        try:
            fd = nofollow.open_file(case_fd, tracked.path)
        except OSError:  # not there (yet), or a link: never read
            return
        try:
            size = os.fstat(fd).st_size
            if size < tracked.offset:  # truncated or replaced: start again
                tracked.offset, tracked.pending = 0, b""
            if size == tracked.offset:
                return
            chunk = os.pread(fd, _MAX_READ, tracked.offset)
        except OSError:
            return
        finally:
            os.close(fd)
        tracked.offset += len(chunk)
        data = tracked.pending + chunk
        cut = data.rfind(b"\n")
        tracked.pending = data[cut + 1 :]  # a partial last line waits for its newline
        if cut < 0:
            return
        for line in data[:cut].decode("utf-8", "replace").split("\n"):
            line = line.strip()
            if not line:
                continue
            if line[0] != "#" and "(" not in line:  # most lines: plain numbers
                tokens = line.split()
                try:
                    values = [float(token) for token in tokens]
                except ValueError:
                    pass  # an odd spelling (parse_number's), or not a number at all
                else:
                    x = values[0]
                    for name, y in zip(tracked.names_for(len(values)), values[1:], strict=True):
                        columns = out.get(name)
                        if columns is None:
                            columns = out[name] = ([], [])
                        columns[0].append(x)
                        columns[1].append(y)
                    continue
            for name, x, y in self._parse_line(tracked, line):
                columns = out.get(name)
                if columns is None:
                    columns = out[name] = ([], [])
                columns[0].append(x)
                columns[1].append(y)

    def _parse_line(self, tracked: _File, line: str) -> list[Point]:
        if not line:
            return []
        if line.startswith("#"):
            header = split_columns(line.lstrip("#"))
            if header:
                tracked.columns = header
                tracked.names = {}
            return []
        tokens = split_columns(line)
        try:
            x = parse_number(tokens[0])
            values = [_values(token) for token in tokens[1:]]
        except (ValueError, IndexError):
            return []
        points: list[Point] = []
        for index, components in enumerate(values, start=1):
            column = tracked.columns[index] if index < len(tracked.columns) else f"col{index}"
            plain = len(components) == 1 and not tokens[index].startswith("(")
            names = series_names(tracked.prefix, column, None if plain else len(components))
            points.extend((name, x, y) for name, y in zip(names, components, strict=True))
        return points
