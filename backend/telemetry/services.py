"""Telemetry ingest (batches of points → one chunk row per series) and objectives."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from django.db import connection, transaction
from django.utils import timezone

from core.exceptions import ApplicationError
from orchestration import render
from studies.choices import Reduce
from studies.models import Simulation
from telemetry.convergence import (
    DEFAULT_POLICY,
    TRUST_WINDOW,
    Decision,
    check,
    relative_change,
    trust_of,
)
from telemetry.events import run_group, send
from telemetry.models import LogChunk, SeriesChunk
from telemetry.selectors import series_length, series_tail, series_values

MAX_SERIES_PER_BATCH = 500
MAX_POINTS_PER_BATCH = 200_000
MAX_LOG_LINES = 5_000


def _finite_or_none(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _clean_series(series: Any) -> dict[str, list[list[float | None]]]:
    """Validate a batch's series (name → [[x, y], …]); NaN/Inf y become None, non-finite x drop."""
    if not isinstance(series, Mapping):
        raise ApplicationError("series must be an object of name → [[x, y], …]", field="series")
    if len(series) > MAX_SERIES_PER_BATCH:
        raise ApplicationError(f"at most {MAX_SERIES_PER_BATCH} series per batch", field="series")
    total = sum(len(p) for p in series.values() if isinstance(p, list))
    if total > MAX_POINTS_PER_BATCH:
        raise ApplicationError(f"at most {MAX_POINTS_PER_BATCH} points per batch", field="series")
    clean: dict[str, list[list[float | None]]] = {}
    for raw_name, points in series.items():
        name = str(raw_name)[:200]
        if not isinstance(points, list):
            raise ApplicationError(
                f"series {name}: points must be a list of [x, y]", field="series"
            )
        out = _fast_points(points)
        if out is None:
            out = _checked_points(name, points)
        if out:
            clean[name] = out
    return clean


_NUMBER = (float, int)


def _fast_points(points: list) -> list[list[float | None]] | None:
    """The common case in bulk: [x, y] lists of finite numbers (None when it is not that)."""
    if any(type(p) is not list or len(p) != 2 for p in points):
        return None
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    if not all(type(v) in _NUMBER for v in xs) or not all(type(v) in _NUMBER for v in ys):
        return None
    xs = list(map(float, xs))
    ys = list(map(float, ys))
    if not all(map(math.isfinite, xs)) or not all(map(math.isfinite, ys)):
        return None
    return [[x, y] for x, y in zip(xs, ys, strict=True)]


def _checked_points(name: str, points: list) -> list[list[float | None]]:
    isfinite = math.isfinite
    out = []
    for p in points:
        if not isinstance(p, list | tuple) or len(p) != 2:
            raise ApplicationError(f"series {name}: each point is [x, y]", field="series")
        x, y = p
        try:
            x = float(x)
            if y is not None:
                y = float(y)
        except (TypeError, ValueError) as exc:
            raise ApplicationError(
                f"series {name}: non-numeric point {p!r}", field="series"
            ) from exc
        if isfinite(x):
            # NaN/Inf are kept as the sign of divergence: stored as NULL, sent as null
            out.append([x, y if y is not None and isfinite(y) else None])
    return out


def _array_literal(values: Sequence[float | None]) -> str:
    """A PostgreSQL float8[] literal. orjson writes floats exactly (shortest round-trip form)
    and null for None, which PostgreSQL's array input reads as NULL."""
    return "{" + orjson.dumps(list(values))[1:-1].decode() + "}"


def telemetry_ingest(
    *,
    run: Simulation,
    attempt: int,
    series: Mapping[str, Sequence[Sequence[float]]],
    log: Sequence[str] = (),
    heartbeat: bool = False,
) -> tuple[int, bool]:
    """Store one batch from the agent as one chunk per series, stamped with the run stream's
    next seq; publish it after commit; apply the study's convergence policy.

    Returns (seq, stop): seq is 0 when the batch was empty; stop says the agent must stop
    (the portal wants the run stopped, or the policy just stopped it). With `heartbeat` the
    batch also counts as the run's sign of life (one UPDATE does both); a batch for an attempt
    that is over raises StaleAttempt, except for a run the portal ended (cancel, policy),
    whose last points are still kept.

    Telemetry commits asynchronously (synchronous_commit off): a database crash can lose the
    last fraction of a second of points, never the run's state, which commits normally.
    """
    clean = _clean_series(series)
    lines = [str(line)[:2000] for line in list(log)[-MAX_LOG_LINES:]] if log else []
    if not clean and not lines:
        if heartbeat:
            from studies.services import run_heartbeat

            return 0, run_heartbeat(run=run, attempt=attempt)
        return 0, False
    with transaction.atomic():
        seq, stop = _store_batch(
            run=run, attempt=attempt, heartbeat=heartbeat, clean=clean, lines=lines
        )
        message = {
            "type": "telemetry",
            "id": str(run.pk),
            "seq": seq,
            "attempt": attempt,
            "series": clean,
            "log": lines,
        }
        transaction.on_commit(lambda: send(run_group(run.pk), message))
        if clean and _apply_policy(run=run, attempt=attempt, new=clean):
            return seq, True  # the policy just stopped the run
    return seq, stop


def _store_batch(
    *,
    run: Simulation,
    attempt: int,
    heartbeat: bool,
    clean: dict[str, list[list[float | None]]],
    lines: list[str],
) -> tuple[int, bool]:
    """One round trip: bump the run stream's seq (with `heartbeat` also the sign of life,
    fenced by attempt and state) and insert the batch's chunks stamped with it.
    Returns (seq, stop requested)."""
    from studies.choices import STARTED_STATES, TERMINAL_STATES
    from studies.services import StaleAttempt

    run_id = str(run.pk)
    if heartbeat:
        states = ", ".join(["%s"] * len(STARTED_STATES))
        update = (
            f"UPDATE {Simulation._meta.db_table} SET event_seq = event_seq + 1,"
            f" heartbeat_at = now() WHERE id = %s AND attempt = %s AND state IN ({states})"
            " RETURNING event_seq, stop_requested"
        )
        params: list[Any] = [run_id, attempt, *STARTED_STATES]
    else:
        update = (
            f"UPDATE {Simulation._meta.db_table} SET event_seq = event_seq + 1 WHERE id = %s"
            " RETURNING event_seq, stop_requested"
        )
        params = [run_id]
    parts = [f"s AS ({update})"]
    if clean:
        rows = []
        params += [run_id, attempt]
        for name, pts in clean.items():
            xs = [p[0] for p in pts]
            ext = _extremes(pts)
            rows.append("(%s, %s, %s, %s, %s, %s, %s, %s, %s)")
            params += [
                name,
                _array_literal(xs),
                _array_literal([p[1] for p in pts]),
                min(xs),
                max(xs),
                ext["low_x"],
                ext["low_y"],
                ext["high_x"],
                ext["high_y"],
            ]
        parts.append(
            f"c AS (INSERT INTO {SeriesChunk._meta.db_table} (run_id, attempt, name, seq,"
            " event_seq, xs, ys, x_min, x_max, low_x, low_y, high_x, high_y, created_at)"
            " SELECT %s, %s, v.name, s.event_seq, s.event_seq, v.xs::float8[], v.ys::float8[],"
            " v.x_min::float8, v.x_max::float8, v.low_x::float8, v.low_y::float8,"
            " v.high_x::float8, v.high_y::float8, now()"
            f" FROM s, (VALUES {', '.join(rows)})"
            " AS v(name, xs, ys, x_min, x_max, low_x, low_y, high_x, high_y))"
        )
    if lines:  # chunks are ordered by the run stream's seq: no per-series counter
        parts.append(
            f"l AS (INSERT INTO {LogChunk._meta.db_table} (run_id, attempt, seq, event_seq,"
            " lines, created_at) SELECT %s, %s, s.event_seq, s.event_seq, %s::text[], now()"
            " FROM s)"
        )
        params += [run_id, attempt, lines]
    with connection.cursor() as cur:
        # telemetry commits asynchronously: a crash may lose the last fraction of a second of
        # points (the run's state reports commit synchronously)
        cur.execute("SET LOCAL synchronous_commit TO OFF")
        cur.execute(f"WITH {', '.join(parts)} SELECT event_seq, stop_requested FROM s", params)
        row = cur.fetchone()
    if row is not None:
        return int(row[0]), heartbeat and bool(row[1])
    current = Simulation.objects.filter(pk=run.pk).values_list("state", "attempt").first()
    if heartbeat and current and current[1] == attempt and current[0] in TERMINAL_STATES:
        # ended by the portal (cancel, policy): keep what came in, and tell the agent to stop
        seq, _ = _store_batch(run=run, attempt=attempt, heartbeat=False, clean=clean, lines=lines)
        return seq, True
    raise StaleAttempt()


def _extremes(pts: list[list[float | None]]) -> dict[str, float | None]:
    finite = [p for p in pts if p[1] is not None]
    if not finite:
        return {"low_x": None, "low_y": None, "high_x": None, "high_y": None}
    low = min(finite, key=lambda p: p[1])
    high = max(finite, key=lambda p: p[1])
    return {"low_x": low[0], "low_y": low[1], "high_x": high[0], "high_y": high[1]}


def _apply_policy(*, run: Simulation, attempt: int, new: Mapping[str, list]) -> bool:
    from studies.services import run_stop_by_policy

    policy = run.study.convergence or DEFAULT_POLICY
    iterations = 0
    if policy.get("converge") and policy.get("min_iterations"):
        residual = next((n for n in sorted(new) if n.startswith("residual.")), None)
        iterations = series_length(run=run, attempt=attempt, name=residual) if residual else 0
    decision = check(
        policy,
        new=new,
        history=lambda name, n: series_tail(run=run, attempt=attempt, name=name, n=n),
        iterations=iterations,
    )
    if decision is None and policy.get("max_wall_seconds") and run.started_at:
        elapsed = (timezone.now() - run.started_at).total_seconds()
        if elapsed > policy["max_wall_seconds"]:
            decision = Decision(
                "max_wall_time",
                f"ran {elapsed:.0f} s, over the {policy['max_wall_seconds']:g} s limit",
            )
    if decision is None:
        return False
    return run_stop_by_policy(
        run=run, attempt=attempt, outcome=decision.outcome, detail=decision.detail
    )


def trust_compute(*, run: Simulation, solver_converged: bool) -> tuple[str, dict[str, Any]]:
    """The trust flag of a finished run from its final residuals and objective drift."""
    names = (
        SeriesChunk.objects.filter(run=run, attempt=run.attempt, name__startswith="residual.")
        .order_by()
        .values_list("name", flat=True)
        .distinct()
    )
    final = {}
    for name in names:
        tail = series_tail(run=run, attempt=run.attempt, name=name, n=1, keep_null=True)
        final[name.removeprefix("residual.")] = tail[-1] if tail else None
    drifts = {}
    for obj, spec in (run.study.objectives or {}).items():
        if "series" in spec:
            values = series_tail(run=run, attempt=run.attempt, name=spec["series"], n=TRUST_WINDOW)
            if values:
                drifts[obj] = relative_change(values)
    return trust_of(
        state=run.state,
        end_reason=run.end_reason,
        solver_converged=solver_converged,
        final_residuals=final,
        drifts=drifts,
        iterations=run.iterations,
    )


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
