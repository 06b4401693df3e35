"""Telemetry ingest (batches of points → one chunk row per series) and objectives."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from django.db.models import Max

from core.exceptions import ApplicationError
from orchestration import render
from studies.choices import Reduce
from studies.models import Simulation
from telemetry.models import LogChunk, SeriesChunk
from telemetry.selectors import series_values

MAX_SERIES_PER_BATCH = 500
MAX_POINTS_PER_BATCH = 200_000
MAX_LOG_LINES = 5_000


def _finite_or_none(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def telemetry_ingest(
    *,
    run: Simulation,
    attempt: int,
    series: Mapping[str, Sequence[Sequence[float]]],
    log: Sequence[str] = (),
) -> int:
    """Store one batch from the agent. Returns the number of points stored."""
    if not isinstance(series, Mapping):
        raise ApplicationError("series must be an object of name → [[x, y], …]", field="series")
    if len(series) > MAX_SERIES_PER_BATCH:
        raise ApplicationError(f"at most {MAX_SERIES_PER_BATCH} series per batch", field="series")
    total = sum(len(p) for p in series.values() if isinstance(p, list))
    if total > MAX_POINTS_PER_BATCH:
        raise ApplicationError(f"at most {MAX_POINTS_PER_BATCH} points per batch", field="series")
    names = [str(n)[:200] for n in series]
    last = dict(
        SeriesChunk.objects.filter(run=run, attempt=attempt, name__in=names)
        .values("name")
        .annotate(seq=Max("seq"))
        .values_list("name", "seq")
    )
    chunks = []
    stored = 0
    for raw_name, points in series.items():
        name = str(raw_name)[:200]
        if not isinstance(points, list):
            raise ApplicationError(
                f"series {name}: points must be a list of [x, y]", field="series"
            )
        xs: list[float] = []
        ys: list[float | None] = []
        for p in points:
            if not isinstance(p, list | tuple) or len(p) != 2:
                raise ApplicationError(f"series {name}: each point is [x, y]", field="series")
            try:
                x = float(p[0])
                y = None if p[1] is None else float(p[1])
            except (TypeError, ValueError) as exc:
                raise ApplicationError(
                    f"series {name}: non-numeric point {p!r}", field="series"
                ) from exc
            if not math.isfinite(x):
                continue
            xs.append(x)
            # NaN/Inf are kept as the sign of divergence: stored as NULL, read back as NaN
            ys.append(y if y is not None and math.isfinite(y) else None)
        if not xs:
            continue
        chunks.append(
            SeriesChunk(
                run=run,
                attempt=attempt,
                name=name,
                seq=last.get(name, -1) + 1,
                xs=xs,
                ys=ys,
                x_min=min(xs),
                x_max=max(xs),
            )
        )
        stored += len(xs)
    SeriesChunk.objects.bulk_create(chunks)
    lines = [str(line)[:2000] for line in list(log)[-MAX_LOG_LINES:]] if log else []
    if lines:
        seq = LogChunk.objects.filter(run=run, attempt=attempt).aggregate(m=Max("seq"))["m"]
        LogChunk.objects.create(
            run=run, attempt=attempt, seq=(seq if seq is not None else -1) + 1, lines=lines
        )
    return stored


def _reduce(values: list[float | None], spec: Mapping[str, Any]) -> float | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    how = spec.get("reduce", Reduce.LAST)
    if how == Reduce.LAST:
        return vals[-1]
    if how == Reduce.MEAN_LAST:
        tail = vals[-int(spec.get("n", 20)) :]
        return sum(tail) / len(tail)
    if how == Reduce.MIN:
        return min(vals)
    if how == Reduce.MAX:
        return max(vals)
    return None


def objectives_compute(*, run: Simulation) -> tuple[dict[str, Any], int | None, float | None]:
    """Objectives of a finished run from its stored telemetry: (objectives, iterations, last time)."""
    objectives: dict[str, Any] = {}
    study = run.study
    for name, spec in (study.objectives or {}).items():
        if "series" in spec:
            _, ys = series_values(run=run, attempt=run.attempt, name=spec["series"])
            objectives[name] = _finite_or_none(_reduce(ys, spec))
    pending = {n: s for n, s in (study.objectives or {}).items() if "expr" in s}
    scope = {**run.context, **objectives}
    for _ in range(len(pending) + 1):
        for name, spec in list(pending.items()):
            try:
                value = render.evaluate(spec["expr"], scope)
            except render.RenderError as exc:
                if "unknown name" in str(exc):
                    continue
                value = None
            except (ZeroDivisionError, TypeError, ValueError, OverflowError):
                value = None
            objectives[name] = _finite_or_none(value) if isinstance(value, int | float) else None
            scope[name] = objectives[name]
            pending.pop(name)
    for name in pending:
        objectives[name] = None
    residual_names = list(
        SeriesChunk.objects.filter(run=run, attempt=run.attempt, name__startswith="residual.")
        .values_list("name", flat=True)
        .distinct()[:1]
    )
    iterations = None
    last_time = None
    if residual_names:
        xs, _ = series_values(run=run, attempt=run.attempt, name=residual_names[0])
        iterations = len(xs)
        last_time = xs[-1] if xs else None
    return objectives, iterations, last_time
