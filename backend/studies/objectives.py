"""A study's objectives: what they are (a series reduced when a run ends, or an expression
of other objectives and the run's values), how a spec's are resolved and checked, how a
run's values are computed from its series, and why one has no value (shown on the run page).

The series themselves are telemetry's: telemetry.run_results reads what a finished run
stored and hands it to `objectives_compute`.
"""

from __future__ import annotations

import difflib
import keyword
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from catalog.inspection import series_check
from core.exceptions import ApplicationError, ErrorCode
from orchestration.case import render
from studies.choices import Reduce


def _invalid(
    message: str, field: str | None = None, code: ErrorCode = ErrorCode.INVALID
) -> ApplicationError:
    return ApplicationError(message, code=code, field=field)


def objectives_resolve(raw: Any, *, names_in_scope: set[str]) -> dict[str, dict[str, Any]]:
    """The study's objectives, normalised (reduce and n defaulted), their expressions
    checked: known names only, none that refers to itself or sits in a circle."""
    out: dict[str, dict[str, Any]] = {}
    for name, obj in (raw or {}).items():  # its shape: the spec's schema
        if keyword.iskeyword(str(name)):
            raise _invalid(
                f"objectives.{name}: {name} is a Python keyword; choose another name",
                f"objectives.{name}",
            )
        if "expr" in obj:
            out[name] = {"expr": str(obj["expr"])}
            continue
        reduce = obj.get("reduce", Reduce.LAST)
        entry: dict[str, Any] = {"series": obj["series"], "reduce": reduce}
        if reduce == Reduce.MEAN_LAST:
            entry["n"] = int(obj.get("n", 20))
        out[name] = entry
    scope = names_in_scope | set(out)
    for name, obj in out.items():
        if "expr" in obj:
            try:
                used = render.expression_names(obj["expr"])
            except render.RenderError as exc:
                raise _invalid(
                    f"objectives.{name}.expr: {exc}",
                    f"objectives.{name}.expr",
                    ErrorCode.EXPRESSION,
                ) from exc
            unknown = sorted(used - scope)
            if unknown:
                raise _invalid(
                    f"objectives.{name}.expr uses unknown name(s) {', '.join(unknown)}; known: {', '.join(sorted(scope))}",
                    f"objectives.{name}.expr",
                    ErrorCode.EXPRESSION,
                )
            if name in used:
                raise _invalid(
                    f"objectives.{name}.expr refers to itself",
                    f"objectives.{name}.expr",
                    ErrorCode.EXPRESSION,
                )
    _check_objective_cycles(out)
    return out


def _check_objective_cycles(objectives: Mapping[str, Mapping[str, Any]]) -> None:
    """Expression objectives that depend on each other in a circle can never be computed."""
    deps = {
        name: render.expression_names(obj["expr"]) & objectives.keys()
        for name, obj in objectives.items()
        if "expr" in obj
    }
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == 2 or name not in deps:
            return
        if state.get(name) == 1:
            cycle = " -> ".join([*path[path.index(name) :], name])
            raise _invalid(
                f"objectives.{name}.expr: the objectives depend on each other in a circle "
                f"({cycle}); one of them must come from a series",
                f"objectives.{name}.expr",
                ErrorCode.EXPRESSION,
            )
        state[name] = 1
        for dep in sorted(deps[name]):
            visit(dep, [*path, name])
        state[name] = 2

    for name in sorted(deps):
        visit(name, [])


def objectives_check_series(
    *,
    objectives: Mapping[str, Mapping[str, Any]],
    convergence: Mapping[str, Any] | None,
    inspection: Mapping[str, Any],
) -> None:
    """Every series the objectives and the convergence objective name is one a run of the
    inspected case can send; a 400 naming the field and the close matches otherwise."""
    for name, obj in objectives.items():
        if "series" in obj:
            series_check(
                inspection=dict(inspection), name=obj["series"], field=f"objectives.{name}.series"
            )
    target = ((convergence or {}).get("converge") or {}).get("objective")
    if target:
        series_check(
            inspection=dict(inspection),
            name=target["series"],
            field="convergence.converge.objective.series",
        )


# --- a run's values ----------------------------------------------------------------------


class ObjectiveValues(NamedTuple):
    values: dict[str, float | None]  # every objective's value, None when it has none
    errors: dict[str, str]  # why an objective has no value, for the user


def objectives_compute(
    *,
    objectives: Mapping[str, Mapping[str, Any]],
    series: Mapping[str, Sequence[float | None]],
    context: Mapping[str, Any],
    sent_series: Callable[[], Sequence[str]],
) -> ObjectiveValues:
    """A finished run's objectives: each series objective reduced from the y values of its
    series (`series`: name → values, None for a gap, for the series the run sent), then the
    expressions, in the order their operands come, over the run's values (`context`) and
    the objectives computed so far. `sent_series` names the series the run sent: asked at
    most once, when a series objective finds none, to say what the run has instead."""
    values: dict[str, float | None] = {}
    errors: dict[str, str] = {}
    sent: Sequence[str] | None = None
    for name, spec in objectives.items():
        if "series" not in spec:
            continue
        ys = series.get(spec["series"])
        values[name] = _finite_or_none(objective_reduce(ys, spec)) if ys is not None else None
        if ys is None:
            if sent is None:
                sent = sent_series()
            errors[name] = missing_series_reason(spec["series"], sent)
        elif values[name] is None:
            errors[name] = f"series {spec['series']} has no finite value"
    pending = {n: s for n, s in objectives.items() if "expr" in s}
    scope = {**context, **values}
    for _ in range(len(pending) + 1):  # each pass computes those whose operands have values
        for name, spec in list(pending.items()):
            try:
                value = render.evaluate(spec["expr"], scope)
            except render.RenderError as exc:
                if "unknown name" in str(exc):
                    continue  # an operand not computed yet: a later pass
                value, errors[name] = None, _expr_error(spec["expr"], scope, exc)
            except (ZeroDivisionError, TypeError, ValueError, OverflowError) as exc:
                value, errors[name] = None, _expr_error(spec["expr"], scope, exc)
            values[name] = _finite_or_none(value) if isinstance(value, int | float) else None
            if values[name] is None and name not in errors:
                errors[name] = f"{spec['expr']} is {value!r}, not a finite number"
            scope[name] = values[name]
            pending.pop(name)
    for name in pending:
        values[name] = None
        errors[name] = "its expression refers to objectives that depend on it"
    return ObjectiveValues(values, errors)


def objective_reduce(values: Sequence[float | None], spec: Mapping[str, Any]) -> float | None:
    """A series objective's value from its series' y values (None: a gap), as its `reduce`
    says: the last, the mean of the last `n`, the minimum or the maximum; None with no value."""
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


def missing_series_reason(name: str, sent: Sequence[str]) -> str:
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


def _finite_or_none(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None
