"""Reads of telemetry: whole series, downsampled series, log tails."""

from __future__ import annotations

import math
from typing import Any

from telemetry.models import LogChunk, SeriesChunk


def series_values(
    *, run, attempt: int, name: str, since_seq: int | None = None, max_seq: int | None = None
) -> tuple[list[float], list[float | None]]:
    """A series' points, optionally only those of live events in (since_seq, max_seq]."""
    xs: list[float] = []
    ys: list[float | None] = []
    chunks = SeriesChunk.objects.filter(run=run, attempt=attempt, name=name)
    if since_seq is not None:
        chunks = chunks.filter(event_seq__gt=since_seq)
    if max_seq is not None:
        chunks = chunks.filter(event_seq__lte=max_seq)
    for cx, cy in chunks.order_by("seq").values_list("xs", "ys"):
        xs.extend(cx)
        ys.extend(cy)
    return xs, ys


def series_tail(
    *, run, attempt: int, name: str, n: int, keep_null: bool = False
) -> list[float | None]:
    """The last n y values of a series (newest last), reading only the chunks needed."""
    out: list[float | None] = []
    for ys in (
        SeriesChunk.objects.filter(run=run, attempt=attempt, name=name)
        .order_by("-seq")
        .values_list("ys", flat=True)
        .iterator(chunk_size=50)
    ):
        out[:0] = ys
        if len(out) >= n:
            break
    if not keep_null:
        out = [v for v in out if v is not None]
    return out[-n:]


def series_length(*, run, attempt: int, name: str) -> int:
    from django.db.models import Func, IntegerField, Sum

    total = SeriesChunk.objects.filter(run=run, attempt=attempt, name=name).aggregate(
        n=Sum(Func("xs", 1, function="array_length", output_field=IntegerField()))
    )["n"]
    return int(total or 0)


def series_names(*, run, attempt: int) -> list[str]:
    return sorted(
        SeriesChunk.objects.filter(run=run, attempt=attempt)
        .values_list("name", flat=True)
        .distinct()
    )


def downsample(
    xs: list[float], ys: list[float | None], max_points: int
) -> tuple[list[float], list[float | None]]:
    """Min/max per bucket, in x order: spikes survive, the shape stays, the count is bounded."""
    n = len(xs)
    if n <= max_points or max_points < 4:
        return xs, ys
    buckets = max_points // 2
    size = n / buckets
    out_x: list[float] = []
    out_y: list[float | None] = []
    for b in range(buckets):
        lo, hi = int(b * size), min(int((b + 1) * size), n)
        if lo >= hi:
            continue
        idx = [i for i in range(lo, hi) if ys[i] is not None]
        if not idx:
            out_x.append(xs[lo])
            out_y.append(None)
            continue
        i_min = min(idx, key=lambda i: ys[i])  # type: ignore[arg-type,return-value]
        i_max = max(idx, key=lambda i: ys[i])  # type: ignore[arg-type,return-value]
        for i in sorted({i_min, i_max}):
            out_x.append(xs[i])
            out_y.append(ys[i])
    return _with_ends(out_x, out_y, (xs[0], ys[0]), (xs[-1], ys[-1]))


def _with_ends(
    xs: list[float], ys: list[float | None], first: tuple, last: tuple
) -> tuple[list[float], list[float | None]]:
    """The series' first and last points kept in a downsampled one: a plot starts and ends
    where the run did (the last value is what a `last` objective reads)."""
    if xs and last[0] > xs[-1]:
        xs, ys = [*xs, last[0]], [*ys, last[1]]
    if xs and first[0] < xs[0]:
        xs, ys = [first[0], *xs], [first[1], *ys]
    return xs, ys


def series_read(
    *,
    run,
    attempt: int | None,
    names: list[str],
    max_points: int = 2000,
    since_seq: int | None = None,
    max_seq: int | None = None,
) -> dict[str, Any]:
    attempt = run.attempt if attempt is None else attempt
    out = {}
    for name in names:
        if since_seq is None:
            summary = _summary_downsample(
                run=run, attempt=attempt, name=name, max_points=max_points, max_seq=max_seq
            )
            if summary is not None:
                out[name] = summary
                continue
        xs, ys = series_values(
            run=run, attempt=attempt, name=name, since_seq=since_seq, max_seq=max_seq
        )
        total = len(xs)
        dx, dy = downsample(xs, ys, max_points)
        out[name] = {
            "x": dx,
            "y": [
                None if (v is None or (isinstance(v, float) and math.isnan(v))) else v for v in dy
            ],
            "points": total,
            "returned": len(dx),
        }
    return out


def _summary_downsample(
    *, run, attempt: int, name: str, max_points: int, max_seq: int | None
) -> dict[str, Any] | None:
    """For series with more chunks than buckets: min/max per bucket from the chunks' stored
    extremes, without loading a single point array. Cost grows with chunks, not points."""
    from django.db.models import Func, IntegerField

    chunks = SeriesChunk.objects.filter(run=run, attempt=attempt, name=name)
    if max_seq is not None:
        chunks = chunks.filter(event_seq__lte=max_seq)
    buckets = max(max_points // 2, 1)
    n_chunks = chunks.count()
    if 2 * n_chunks < buckets:  # too few chunks for half the asked resolution: read points
        return None
    length = Func("xs", 1, function="array_length", output_field=IntegerField())
    rows = list(
        chunks.order_by("seq").values_list("low_x", "low_y", "high_x", "high_y", length, "seq")
    )
    per = -(-len(rows) // buckets)
    xs: list[float] = []
    ys: list[float | None] = []
    total = 0
    for b in range(0, len(rows), per):
        group = rows[b : b + per]
        total += sum(r[4] or 0 for r in group)
        lows = [(r[0], r[1]) for r in group if r[1] is not None]
        highs = [(r[2], r[3]) for r in group if r[3] is not None]
        if not lows:
            continue
        low = min(lows, key=lambda p: p[1])
        high = max(highs, key=lambda p: p[1])
        for x, y in sorted({low, high}):
            xs.append(x)
            ys.append(y)
    if rows:
        seqs = [rows[0][5], rows[-1][5]]
        ends = {
            seq: (x, y) for seq, x, y in chunks.filter(seq__in=seqs).values_list("seq", "xs", "ys")
        }
        (fx, fy), (lx, ly) = ends[seqs[0]], ends[seqs[1]]
        xs, ys = _with_ends(xs, ys, (fx[0], fy[0]), (lx[-1], ly[-1]))
    return {"x": xs, "y": ys, "points": total, "returned": len(xs)}


def log_tail(*, run, attempt: int | None = None, lines: int = 200) -> list[str]:
    attempt = run.attempt if attempt is None else attempt
    collected: list[str] = []
    for chunk in (
        LogChunk.objects.filter(run=run, attempt=attempt)
        .order_by("-seq")
        .values_list("lines", flat=True)
        .iterator(chunk_size=20)
    ):
        collected[:0] = chunk
        if len(collected) >= lines:
            break
    return collected[-lines:]


def log_since(*, run, attempt: int, since_seq: int, max_seq: int) -> list[str]:
    """Log lines of the live events in (since_seq, max_seq], for a client repairing a gap."""
    out: list[str] = []
    for lines in (
        LogChunk.objects.filter(
            run=run, attempt=attempt, event_seq__gt=since_seq, event_seq__lte=max_seq
        )
        .order_by("seq")
        .values_list("lines", flat=True)
    ):
        out.extend(lines)
    return out
