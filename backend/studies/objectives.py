"""A study's objectives: series reduced when a run ends, or expressions of other objectives
and the run's values."""

from __future__ import annotations

import keyword
from collections.abc import Mapping
from typing import Any

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
