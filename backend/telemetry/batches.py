"""Telemetry batches as the agents send them, checked: series as columns of floats.

A batch holds up to 200,000 points, so the common case is checked in C-level passes (type
sets, one sum: NaN and ±Infinity propagate through it) and only a batch that fails them is
looked at point by point. NaN/Inf y values are kept as gaps (None: the sign of divergence).
"""

from __future__ import annotations

import array
import binascii
import itertools
import math
import reprlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

import orjson

from core.db import Float8Array
from core.exceptions import ApplicationError

MAX_SERIES_PER_BATCH = 500
MAX_POINTS_PER_BATCH = 200_000
MAX_LOG_LINES = 5_000


# (xs, ys) of one series: lists, or arrays of floats (packed columns, decoded)
Columns = tuple[Sequence[float], Sequence[float | None]]


def _clean_series(series: Any) -> dict[str, Columns]:
    """Validate a batch's series as columns (xs, ys); NaN/Inf y become None, non-finite x drop.

    A series comes as ``{"x": [...], "y": [...]}`` (columns), each column a list of numbers or
    the base64 of its little-endian float64 values (packed: what the agent sends, the cheapest
    to write and read), or as ``[[x, y], ...]`` (points)."""
    if not isinstance(series, Mapping):
        raise ApplicationError(
            'series must be an object of name → {"x": [...], "y": [...]} or [[x, y], …]',
            field="series",
        )
    if len(series) > MAX_SERIES_PER_BATCH:
        raise ApplicationError(f"at most {MAX_SERIES_PER_BATCH} series per batch", field="series")
    total = sum(_size(p) for p in series.values())
    if total > MAX_POINTS_PER_BATCH:
        raise ApplicationError(f"at most {MAX_POINTS_PER_BATCH} points per batch", field="series")
    if "\x00" in "".join(map(str, series)):  # one pass over all the names
        bad = next(str(n) for n in series if "\x00" in str(n))
        raise ApplicationError(
            f"series {bad.replace(chr(0), '?')!r}: names must not contain NUL characters",
            field="series",
        )
    clean: dict[str, Columns] = {}
    for raw_name, points in series.items():
        name = str(raw_name)[:200]
        if isinstance(points, dict):
            out = _columns(name, points)
        elif isinstance(points, list):
            checked = _fast_points(points)
            if checked is None:
                checked = _checked_points(name, points)
            out = ([p[0] for p in checked], [p[1] for p in checked])
        else:
            raise ApplicationError(
                f'series {name}: give {{"x": [...], "y": [...]}} or a list of [x, y]',
                field="series",
            )
        if out[0]:
            clean[name] = out
    return clean


def _size(raw: Any) -> int:
    """How many points a series of a batch claims (before anything is decoded)."""
    if isinstance(raw, list):
        return len(raw)
    if isinstance(raw, dict):
        x = raw.get("x")
        if isinstance(x, list):
            return len(x)
        if isinstance(x, str):
            return len(x) * 3 // 32  # base64 of 8-byte values
    return 0


_SWAP = sys.byteorder != "little"


def _unpacked(name: str, axis: str, column: Any) -> Any:
    """A packed column (base64 of little-endian float64s) as an array of floats; a list (or
    anything else, for the caller to refuse) as it is."""
    if not isinstance(column, str):
        return column
    try:
        raw = binascii.a2b_base64(column, strict_mode=True)
    except (binascii.Error, ValueError):
        raise ApplicationError(
            f"series {name}: {axis} is neither a list of numbers nor base64", field="series"
        ) from None
    if len(raw) % 8:
        raise ApplicationError(
            f"series {name}: packed {axis} has {len(raw)} bytes, not a whole number of "
            "8-byte float64 values",
            field="series",
        )
    values = array.array("d")
    values.frombytes(raw)
    if _SWAP:
        values.byteswap()
    return values  # kept as an array: it goes to PostgreSQL in binary as it is


def _columns(name: str, raw: dict) -> Columns:
    xs, ys = raw.get("x"), raw.get("y")
    if set(raw) == {"x", "y"}:
        xs, ys = _unpacked(name, "x", xs), _unpacked(name, "y", ys)
    if set(raw) != {"x", "y"} or not isinstance(xs, _COLUMN) or not isinstance(ys, _COLUMN):
        raise ApplicationError(
            f'series {name}: columns are {{"x": [...], "y": [...]}}, two lists of numbers '
            "or two base64 strings of little-endian float64s",
            field="series",
        )
    if len(xs) != len(ys):
        raise ApplicationError(
            f"series {name}: {len(xs)} x values but {len(ys)} y values", field="series"
        )
    if _finite_numbers(xs) and _finite_numbers(ys):
        return xs, ys  # the common case, checked in C-level passes
    points = _checked_points(name, list(zip(xs, ys, strict=True)))
    return [p[0] for p in points], [p[1] for p in points]


_COLUMN = (list, array.array)


def _finite_numbers(values: list | array.array) -> bool:
    if isinstance(values, array.array):  # floats by construction
        return math.isfinite(sum(values))
    if not set(map(type, values)) <= _NUMBER:
        return False
    try:
        return math.isfinite(sum(values))  # NaN and ±Infinity propagate through a sum
    except OverflowError:  # an integer too large for a float
        return False


_NUMBER = {float, int}


def _fast_points(points: list) -> list | None:
    """The common case in bulk: [x, y] lists of finite numbers, checked with C-level passes
    (type and length sets, one sum) and returned as they are; None when it is not that case
    and each point needs looking at."""
    if not points:
        return points
    if set(map(type, points)) != {list} or set(map(len, points)) != {2}:
        return None
    flat = list(itertools.chain.from_iterable(points))
    if not set(map(type, flat)) <= _NUMBER:
        return None
    try:
        # a finite sum means every term is finite (NaN and ±Infinity propagate); an overflow
        # of finite terms only sends the batch down the slow path, which is also right
        return points if math.isfinite(sum(flat)) else None
    except OverflowError:  # an integer too large for a float
        return None


def _checked_points(name: str, points: list) -> list[tuple[float, float | None]]:
    isfinite = math.isfinite
    out: list[tuple[float, float | None]] = []
    for p in points:
        if not isinstance(p, list | tuple) or len(p) != 2:
            raise ApplicationError(f"series {name}: each point is [x, y]", field="series")
        x, y = p
        try:
            x = float(x)
            if y is not None:
                y = float(y)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ApplicationError(
                f"series {name}: non-numeric point {reprlib.repr(p)}", field="series"
            ) from exc
        if isfinite(x):
            # NaN/Inf are kept as the sign of divergence: stored as NULL, sent as null
            out.append((x, y if y is not None and isfinite(y) else None))
    return out


def float8s(values: Sequence[float | None]) -> Float8Array | str:
    """A column for PostgreSQL: binary float8[] (nothing for the server to parse), or the
    text literal when it has gaps (None: NULL elements)."""
    return Float8Array.of(values) or _array_literal(values)


def _array_literal(values: Sequence[float | None]) -> str:
    """A PostgreSQL float8[] literal. orjson writes floats exactly (shortest round-trip form)
    and null for None, which PostgreSQL's array input reads as NULL."""
    return "{" + orjson.dumps(list(values))[1:-1].decode() + "}"


def check_log_lines(lines: Any) -> None:
    """Log lines as a batch brings them: a list of text without NUL characters, valid
    Unicode; checked in one pass (a check per line cost more than storing the batch)."""
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        raise ApplicationError("log must be a list of strings (the new lines)", field="log")
    text = "".join(lines)
    if "\x00" in text:
        raise ApplicationError("log lines must not contain NUL characters", field="log")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ApplicationError(
            "log lines must be valid Unicode (no lone surrogates)", field="log"
        ) from None


def clean_batch(series: Any, log: Sequence[str]) -> tuple[dict[str, Columns], list[str]]:
    """A batch's series as checked columns and its log lines (cut to 2,000 characters, the
    last MAX_LOG_LINES); an ApplicationError names what is wrong."""
    clean = _clean_series(series)
    lines = [str(line)[:2000] for line in list(log)[-MAX_LOG_LINES:]] if log else []
    return clean, lines


def gapless(ys: Sequence[float | None]) -> TypeGuard[Sequence[float]]:
    """Whether a column of y values has no gap (None), in one C-level pass."""
    return None not in ys


def extremes(
    xs: Sequence[float], ys: Sequence[float | None]
) -> tuple[float | None, float | None, float | None, float | None]:
    """(x at the lowest y, lowest y, x at the highest y, highest y) of a chunk, ignoring gaps
    (None); the first one where several points tie. Four Nones for a chunk of gaps only."""
    values: Sequence[float]
    if gapless(ys):
        values = ys
    else:
        pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
        if not pairs:
            return (None, None, None, None)
        xs, values = [p[0] for p in pairs], [p[1] for p in pairs]
    low, high = min(values), max(values)
    return (xs[values.index(low)], low, xs[values.index(high)], high)
