"""Telemetry ingest (batches of points → one chunk row per series) and objectives."""

from __future__ import annotations

import array
import binascii
import difflib
import itertools
import math
import reprlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import orjson
from django.db import connection, transaction
from django.utils import timezone

from core.db import Float8Array, bound_cursor
from core.exceptions import ApplicationError
from orchestration import render
from studies.choices import TERMINAL_STATES, Reduce
from studies.models import Simulation, Study
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
from telemetry.selectors import series_length, series_tail
from telemetry.watch import is_watched

MAX_SERIES_PER_BATCH = 500
MAX_POINTS_PER_BATCH = 200_000
MAX_LOG_LINES = 5_000


def _finite_or_none(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


Columns = tuple[list[float], list[float | None]]  # (xs, ys) of one series


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
        except (TypeError, ValueError, OverflowError) as exc:
            raise ApplicationError(
                f"series {name}: non-numeric point {reprlib.repr(p)}", field="series"
            ) from exc
        if isfinite(x):
            # NaN/Inf are kept as the sign of divergence: stored as NULL, sent as null
            out.append([x, y if y is not None and isfinite(y) else None])
    return out


def _float8s(values: Sequence[float | None]) -> Float8Array | str:
    """A column for PostgreSQL: binary float8[] (nothing for the server to parse), or the
    text literal when it has gaps (None: NULL elements)."""
    return Float8Array.of(values) or _array_literal(values)


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
    seq, and publish it; apply the study's convergence policy to the new points.

    Returns (seq, stop): seq is 0 when the batch was empty; stop says the agent must stop
    (the portal wants the run stopped, or the policy just stopped it). With `heartbeat` the
    batch also counts as the run's sign of life (one UPDATE does both); a batch for an attempt
    that is over raises StaleAttempt, except for a run the portal ended (cancel, policy),
    whose last points are still kept.

    Telemetry commits asynchronously (synchronous_commit off): a database crash can lose the
    last fraction of a second of points, never the run's state, which commits normally.
    """
    from studies.services import StaleAttempt

    clean, lines = _clean_batch(series, log)
    if not clean and not lines:
        if heartbeat:
            from studies.services import run_heartbeat

            return 0, run_heartbeat(run=run, attempt=attempt)
        return 0, False
    row = _store_batch(
        run_id=str(run.pk), attempt=attempt, heartbeat=heartbeat, clean=clean, lines=lines
    )
    stop = heartbeat and row is not None and row.stop
    if row is None:
        current = Simulation.objects.filter(pk=run.pk).values_list("state", "attempt").first()
        if not (heartbeat and current and current[1] == attempt and current[0] in TERMINAL_STATES):
            raise StaleAttempt()
        # ended by the portal (cancel, policy): keep what came in, and tell the agent to stop
        row = _store_batch(
            run_id=str(run.pk), attempt=attempt, heartbeat=False, clean=clean, lines=lines
        )
        assert row is not None  # the unfenced update always finds the run
        stop = True
    return row.seq, _after_store(
        run=run, attempt=attempt, seq=row.seq, clean=clean, lines=lines
    ) or stop


def telemetry_ingest_fenced(
    *,
    run_id: str,
    attempt: int,
    token_hash: str,
    series: Any,
    log: Sequence[str] = (),
    watched: bool | None = None,
) -> tuple[int, bool] | None:
    """The agents' hot path: telemetry_ingest(heartbeat=True) for a run named by id, its
    token's hash and attempt, in one round trip to PostgreSQL (the fence, the sign of life, the
    chunks and the log in one statement that also returns what the convergence policy needs).

    None when that statement stores nothing: an empty batch, an unknown run, a wrong token, an
    attempt that is over or a run that has ended. The caller then takes the slow path, which
    tells these apart (404, 401, 409, or keeping the last points of a run the portal ended).
    """
    clean, lines = _clean_batch(series, log)
    if not clean and not lines:
        return None
    row = _store_batch(
        run_id=run_id,
        attempt=attempt,
        heartbeat=True,
        clean=clean,
        lines=lines,
        token_hash=token_hash,
    )
    if row is None:
        return None
    run = Simulation(pk=run_id, attempt=attempt, study_id=row.study_id, started_at=row.started_at)
    field = Study._meta.get_field("convergence")
    run.study = Study(
        pk=row.study_id, convergence=field.from_db_value(row.convergence, None, connection)
    )
    return row.seq, _after_store(
        run=run, attempt=attempt, seq=row.seq, clean=clean, lines=lines, watched=watched
    ) or row.stop


def telemetry_check_batch(*, series: Any, log: Sequence[str]) -> tuple[dict, list[str]]:
    """A batch's series as columns and its log lines, checked (ApplicationError naming what
    is wrong): for a caller that must know the batch is good before it acts."""
    return _clean_batch(series, log)


def telemetry_final_batch(*, run_id, attempt: int, batch: tuple[dict, list[str]]) -> bool:
    """Store the last batch that a final report carries (checked by telemetry_check_batch;
    the caller checked the token).

    Kept under the same fence as any batch, and also for a run the portal ended meanwhile
    (cancel, policy) as long as its agent's final report is not in yet: a repeated final
    report (its answer was lost) stores nothing twice. True when the batch was stored."""
    from studies.services import StaleAttempt

    clean, lines = batch
    if not clean and not lines:
        return False
    row = _store_batch(
        run_id=str(run_id), attempt=attempt, heartbeat=True, clean=clean, lines=lines
    )
    if row is None:
        current = (
            Simulation.objects.filter(pk=run_id)
            .values_list("state", "attempt", "results_at")
            .first()
        )
        if current is None or current[1] != attempt:
            raise StaleAttempt()
        if current[0] not in TERMINAL_STATES or current[2] is not None:
            return False  # a repeat: the batch is in already
        row = _store_batch(
            run_id=str(run_id), attempt=attempt, heartbeat=False, clean=clean, lines=lines
        )
        assert row is not None  # the unfenced update always finds the run
    run = Simulation(pk=run_id, attempt=attempt, study_id=row.study_id, started_at=row.started_at)
    field = Study._meta.get_field("convergence")
    run.study = Study(
        pk=row.study_id, convergence=field.from_db_value(row.convergence, None, connection)
    )
    _after_store(run=run, attempt=attempt, seq=row.seq, clean=clean, lines=lines)
    return True


def _clean_batch(series: Any, log: Sequence[str]) -> tuple[dict[str, Columns], list[str]]:
    clean = _clean_series(series)
    lines = [str(line)[:2000] for line in list(log)[-MAX_LOG_LINES:]] if log else []
    return clean, lines


def _after_store(
    *,
    run: Simulation,
    attempt: int,
    seq: int,
    clean: dict[str, Columns],
    lines: list[str],
    watched: bool | None = None,
) -> bool:
    """Publish a stored batch (to the run's subscribers: only while someone watches it, as
    the caller found just before, else checked after commit) and apply the convergence
    policy; True when it stopped the run."""

    def publish() -> None:
        points = {name: [list(p) for p in zip(*cols, strict=True)] for name, cols in clean.items()}
        send(
            run_group(run.pk),
            {
                "type": "telemetry",
                "id": str(run.pk),
                "seq": seq,
                "attempt": attempt,
                "series": points,  # the live protocol's [[x, y], …]
                "log": lines,
            },
        )

    if watched is None:
        transaction.on_commit(lambda: is_watched(run.pk) and publish())
    elif watched:
        transaction.on_commit(publish)
    return bool(clean) and _apply_policy(run=run, attempt=attempt, new=clean)


class _Stored(NamedTuple):
    seq: int
    stop: bool
    study_id: Any
    started_at: Any
    convergence: Any


def _store_batch(
    *,
    run_id: str,
    attempt: int,
    heartbeat: bool,
    clean: dict[str, Columns],
    lines: list[str],
    token_hash: str | None = None,
) -> _Stored | None:
    """One statement, its own transaction: bump the run stream's seq (with `heartbeat` also
    the sign of life, fenced by attempt and state, and by the token's hash when given) and
    insert the batch's chunks and log lines stamped with it. None when the fence held.

    It commits asynchronously (synchronous_commit off for this transaction only): a database
    crash may lose the last fraction of a second of points, never a run's state, whose
    reports commit normally.
    """
    from studies.choices import STARTED_STATES

    run_table, study_table = Simulation._meta.db_table, Study._meta.db_table
    where = "r.id = %s"
    params: list[Any] = [run_id]
    sets = "event_seq = r.event_seq + 1"
    if heartbeat:
        sets += ", heartbeat_at = now()"
        where += f" AND r.attempt = %s AND r.state IN ({', '.join(['%s'] * len(STARTED_STATES))})"
        params += [attempt, *STARTED_STATES]
    if token_hash is not None:
        where += " AND r.token_hash = %s"
        params.append(token_hash)
    parts = [
        f"s AS (UPDATE {run_table} r SET {sets} FROM {study_table} st"
        f" WHERE {where} AND st.id = r.study_id"
        " RETURNING r.event_seq, r.stop_requested, r.study_id, r.started_at, st.convergence)"
    ]
    if clean:
        rows = []
        params += [run_id, attempt]
        for name, (xs, ys) in clean.items():
            rows.append("(%s, %s, %s, %s, %s, %s, %s, %s, %s)")
            params += [name, _float8s(xs), _float8s(ys), min(xs), max(xs)]
            params += _extremes(xs, ys)
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
    sql = (
        f"WITH {', '.join(parts)} SELECT event_seq, stop_requested, study_id, started_at,"
        " convergence, set_config('synchronous_commit', 'off', true) FROM s"
    )
    # outside a transaction block the statement is its own transaction (one round trip);
    # inside one (a caller's atomic block) the setting holds for that whole transaction
    with bound_cursor() as cur:
        cur.execute(sql, params)
        row = cur.fetchone()
    return None if row is None else _Stored(int(row[0]), bool(row[1]), row[2], row[3], row[4])


def _extremes(xs: list, ys: list) -> tuple:
    """(x at the lowest y, lowest y, x at the highest y, highest y) of a chunk, ignoring gaps
    (None); the first one where several points tie. Four Nones for a chunk of gaps only."""
    if None in ys:
        pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
        if not pairs:
            return (None, None, None, None)
        xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    low, high = min(ys), max(ys)
    return (xs[ys.index(low)], low, xs[ys.index(high)], high)


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


_SUMMARY_SQL = """
WITH c AS (
    SELECT name, seq, xs, ys FROM {table}
    WHERE run_id = %(run)s AND attempt = %(attempt)s
      AND (name LIKE 'residual.%%' OR name = ANY(%(names)s))
)
SELECT name,
       sum(cardinality(xs))::bigint,
       (array_agg(xs[cardinality(xs)] ORDER BY seq DESC))[1],
       (array_agg(ys[cardinality(ys)] ORDER BY seq DESC))[1],
       CASE WHEN name = ANY(%(names)s) THEN (
           SELECT array_agg(u.y ORDER BY c2.seq, u.o)
           FROM c AS c2, unnest(c2.ys) WITH ORDINALITY AS u(y, o)
           WHERE c2.name = c.name
       ) END
FROM c GROUP BY name
"""


class _Series(NamedTuple):
    count: int
    last_x: float | None
    last_y: float | None  # None: the last point is a gap (NaN)
    ys: list[float | None] | None  # every y, for the series objectives read


def _series_summary(*, run: Simulation, names: list[str]) -> dict[str, _Series]:
    """In one statement: count and last point of every residual series, and all the y
    values of the named series (those objectives reduce)."""
    with connection.cursor() as cur:
        cur.execute(
            _SUMMARY_SQL.format(table=SeriesChunk._meta.db_table),
            {"run": str(run.pk), "attempt": run.attempt, "names": names},
        )
        return {name: _Series(int(n), x, y, ys) for name, n, x, y, ys in cur.fetchall()}


def results_compute(
    *,
    run: Simulation,
    solver_converged: bool,
    iterations: int | None = None,
    last_time: float | None = None,
) -> None:
    """A finished run's objectives, iterations, last time and trust flag, from its stored
    telemetry, set on `run` (not saved). One query, whatever the number of series.
    `iterations` / `last_time`, when the agent counted them, win over the stored points."""
    specs = run.study.objectives or {}
    wanted = sorted({spec["series"] for spec in specs.values() if "series" in spec})
    summary = _series_summary(run=run, names=wanted)
    objectives: dict[str, Any] = {}
    errors: dict[str, str] = {}  # why an objective has no value, for the user
    for name, spec in specs.items():
        if "series" in spec:
            series = summary.get(spec["series"])
            objectives[name] = _finite_or_none(_reduce(series.ys or [], spec)) if series else None
            if series is None:
                errors[name] = _missing_series(run, spec["series"])
            elif objectives[name] is None:
                errors[name] = f"series {spec['series']} has no finite value"
    pending = {n: s for n, s in specs.items() if "expr" in s}
    scope = {**run.context, **objectives}
    for _ in range(len(pending) + 1):
        for name, spec in list(pending.items()):
            try:
                value = render.evaluate(spec["expr"], scope)
            except render.RenderError as exc:
                if "unknown name" in str(exc):
                    continue
                value, errors[name] = None, _expr_error(spec["expr"], scope, exc)
            except (ZeroDivisionError, TypeError, ValueError, OverflowError) as exc:
                value, errors[name] = None, _expr_error(spec["expr"], scope, exc)
            objectives[name] = _finite_or_none(value) if isinstance(value, int | float) else None
            if objectives[name] is None and name not in errors:
                errors[name] = f"{spec['expr']} is {value!r}, not a finite number"
            scope[name] = objectives[name]
            pending.pop(name)
    for name in pending:
        objectives[name] = None
        errors[name] = "its expression refers to objectives that depend on it"
    residuals = sorted(n for n in summary if n.startswith("residual."))
    # a solver step solves every field at least once: the longest residual series counts them
    steps = max((summary[n] for n in residuals), key=lambda s: s.count, default=None)
    run.objectives = objectives
    run.iterations = iterations if iterations is not None else (steps.count if steps else None)
    run.last_time = last_time if last_time is not None else (steps.last_x if steps else None)
    drifts = {}
    for obj, spec in specs.items():
        series = summary.get(spec.get("series", ""))
        if series and series.ys:
            tail = [v for v in series.ys if v is not None][-TRUST_WINDOW:]
            if tail:
                drifts[obj] = relative_change(tail)
    run.trust, run.trust_detail = trust_of(
        state=run.state,
        end_reason=run.end_reason,
        solver_converged=solver_converged,
        final_residuals={n.removeprefix("residual."): summary[n].last_y for n in residuals},
        drifts=drifts,
        iterations=run.iterations,
    )
    if errors:
        run.trust_detail["objective_errors"] = errors


def _missing_series(run: Simulation, name: str) -> str:
    """Why a series objective has no value: the run has no such series, and what it has."""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT DISTINCT name FROM {SeriesChunk._meta.db_table}"
            " WHERE run_id = %s AND attempt = %s ORDER BY name",
            [str(run.pk), run.attempt],
        )
        names = [n for (n,) in cur.fetchall() if not n.startswith(("residual", "cpu.", "memory."))]
    if not names:
        return f"no series named {name}: the run sent no function-object series"
    close = difflib.get_close_matches(name, names, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    listed = ", ".join(names[:30]) + (", …" if len(names) > 30 else "")
    return f"no series named {name}{hint}; this run has: {listed}"


def _expr_error(expr: str, scope: Mapping[str, Any], exc: Exception) -> str:
    missing = sorted(n for n in render.expression_names(expr) if n in scope and scope[n] is None)
    if missing:
        return f"{expr}: {', '.join(missing)} {'has' if len(missing) == 1 else 'have'} no value"
    return f"{expr}: {exc}"


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
