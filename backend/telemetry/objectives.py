"""A finished run's objectives, iterations and trust flag, from its stored telemetry.

One query reads what every objective needs (telemetry chunks reduced in PostgreSQL); an
objective without a value says why (a missing series with a close match, missing operands,
division by zero), shown on the run page.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from django.db import connection

from orchestration.case import render
from studies.choices import Reduce
from studies.models import Run
from telemetry.convergence import (
    TRUST_WINDOW,
    relative_change,
    trust_of,
)
from telemetry.models import SeriesChunk


def _finite_or_none(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


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
    points: int  # how many points the series has
    last_x: float | None
    last_y: float | None  # None: the last point is a gap (NaN)
    ys: list[float | None] | None  # every y, for the series objectives read


def _series_summary(*, run: Run, names: list[str]) -> dict[str, _Series]:
    """In one statement: count and last point of every residual series, and all the y
    values of the named series (those objectives reduce)."""
    with connection.cursor() as cur:
        cur.execute(
            _SUMMARY_SQL.format(table=SeriesChunk._meta.db_table),
            # a reused run's series are its source's (same attempt number: copied at reuse)
            {"run": str(run.results_run_id), "attempt": run.attempt, "names": names},
        )
        return {name: _Series(int(n), x, y, ys) for name, n, x, y, ys in cur.fetchall()}


def results_compute(
    *,
    run: Run,
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
    sent: list[str] | None = None  # the series the run sent, when one is missing
    for name, spec in specs.items():
        if "series" in spec:
            series = summary.get(spec["series"])
            objectives[name] = _finite_or_none(_reduce(series.ys or [], spec)) if series else None
            if series is None:
                if sent is None:  # read once, whatever the number of missing series
                    sent = _sent_series(run)
                errors[name] = _missing_series(spec["series"], sent)
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
    steps = max((summary[n] for n in residuals), key=lambda s: s.points, default=None)
    run.objectives = objectives
    run.iterations = iterations if iterations is not None else (steps.points if steps else None)
    run.last_time = last_time if last_time is not None else (steps.last_x if steps else None)
    rules = run.study.spec.get("trust") or {}  # the study's trust rules (docs/live.md)
    window = int(rules.get("window", TRUST_WINDOW))
    drifts = {}
    for obj, spec in specs.items():
        series = summary.get(spec.get("series", ""))
        if series and series.ys:
            tail = [v for v in series.ys if v is not None][-window:]
            if tail:
                drifts[obj] = relative_change(tail)
    run.trust, run.trust_detail = trust_of(
        state=run.state,
        end_reason=run.end_reason,
        solver_converged=solver_converged,
        final_residuals={n.removeprefix("residual."): summary[n].last_y for n in residuals},
        drifts=drifts,
        iterations=run.iterations,
        rule=(run.study.convergence or {}).get("converge"),
        trust_rules=rules,
    )
    if errors:
        run.trust_detail["objective_errors"] = errors


def _sent_series(run: Run) -> list[str]:
    """The names of the series the run sent, but its resource samples."""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT DISTINCT name FROM {SeriesChunk._meta.db_table}"
            " WHERE run_id = %s AND attempt = %s ORDER BY name",
            [str(run.results_run_id), run.attempt],
        )
        return [n for (n,) in cur.fetchall() if not n.startswith(("cpu.", "memory."))]


def _missing_series(name: str, sent: list[str]) -> str:
    """Why a series objective has no value: the run has no such series, and what it has
    of its kind (residuals for a residual, function-object series for the others)."""
    residual = name.startswith("residual.")
    names = [n for n in sent if n.startswith("residual.") == residual]
    if not sent:
        return f"no series named {name}: the run sent no series (its solver wrote none)"
    if not names:
        kind = "residuals" if residual else "function-object series"
        return f"no series named {name}: the run sent no {kind}"
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
