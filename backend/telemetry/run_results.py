"""A finished run's results from its stored telemetry: its objectives (computed as
studies.objectives says, from the series read here), iterations, last time and trust flag.

One query reads what every objective needs (telemetry chunks reduced in PostgreSQL).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from django.db import connection

from studies.choices import Reduce, Trust, run_is_complete
from studies.models import Run
from studies.objectives import objectives_compute
from telemetry.convergence import (
    TRUST_OSCILLATION,
    TRUST_OSCILLATION_FLOOR,
    TRUST_WINDOW,
    oscillation_of,
    relative_change,
    trust_of,
)
from telemetry.models import SeriesChunk

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
    `iterations` / `last_time`, when the agent counted them, win over the stored points.

    Only a run that completed (run_is_complete: its `state` and `end_reason` are set
    before this is called) has results: a run that did not gets null for every objective,
    and the values its partial series give go to `partial_objectives`, never mixed in."""
    specs = run.study.objectives or {}
    wanted = sorted({spec["series"] for spec in specs.values() if "series" in spec})
    summary = _series_summary(run=run, names=wanted)
    computed = objectives_compute(
        objectives=specs,
        series={name: summary[name].ys or [] for name in wanted if name in summary},
        context=run.context,
        sent_series=lambda: _sent_series(run),
    )
    residuals = sorted(n for n in summary if n.startswith("residual."))
    # a solver step solves every field at least once: the longest residual series counts them
    steps = max((summary[n] for n in residuals), key=lambda s: s.points, default=None)
    if run_is_complete(state=run.state, end_reason=run.end_reason):
        run.objectives, run.partial_objectives = computed.values, {}
    else:
        run.objectives = dict.fromkeys(computed.values)
        run.partial_objectives = {k: v for k, v in computed.values.items() if v is not None}
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
    if computed.errors:
        run.trust_detail["objective_errors"] = computed.errors
    if run.trust and run.trust != Trust.DIVERGED:
        _judge_oscillation(run, specs=specs, summary=summary, rules=rules)


def _judge_oscillation(
    run: Run, *, specs: dict[str, Any], summary: dict[str, _Series], rules: dict[str, Any]
) -> None:
    """A mean_last objective whose window swings beyond the study's tolerance (trust rule
    `oscillation_below`, relative to max(|mean|, `oscillation_floor`)) makes the run
    unsteady: its mean is reported with the swing beside it, in `trust_detail.oscillation`;
    the flag it had otherwise stays in `trust_detail.steady_trust`."""
    tolerance = float(rules.get("oscillation_below", TRUST_OSCILLATION))
    floor = float(rules.get("oscillation_floor", TRUST_OSCILLATION_FLOOR))
    measured: dict[str, dict[str, Any]] = {}
    for name, spec in specs.items():
        series = summary.get(spec.get("series", ""))
        if spec.get("reduce") != Reduce.MEAN_LAST or not series or not series.ys:
            continue
        window = [v for v in series.ys if v is not None][-int(spec.get("n", 20)) :]
        swing = oscillation_of(window, floor=floor)
        if swing is not None:
            measured[name] = {
                "mean": swing.mean,
                "amplitude": swing.amplitude,
                "relative": swing.relative,
                "window": swing.window,
                "oscillating": swing.oscillates(tolerance),
            }
    if not measured:
        return
    run.trust_detail["oscillation"] = measured
    swinging = [n for n, m in measured.items() if m["oscillating"]]
    if not swinging:
        return
    words = ", ".join(
        f"{n} {measured[n]['mean']:.4g} ± {measured[n]['amplitude']:.2g}" for n in swinging
    )
    run.trust_detail["steady_trust"] = run.trust
    run.trust_detail["basis"] = "oscillation"
    run.trust_detail["why"] = (
        f"oscillating over the averaged window: {words}; the swing is above "
        f"{tolerance:g} of the mean, so the mean is not a steady value (an unsteady flow: "
        "consider a transient solver, or read the mean with its swing)"
    )
    run.trust = Trust.UNSTEADY


def _sent_series(run: Run) -> list[str]:
    """The names of the series the run sent, but its resource samples."""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT DISTINCT name FROM {SeriesChunk._meta.db_table}"
            " WHERE run_id = %s AND attempt = %s ORDER BY name",
            [str(run.results_run_id), run.attempt],
        )
        return [n for (n,) in cur.fetchall() if not n.startswith(("cpu.", "memory."))]
