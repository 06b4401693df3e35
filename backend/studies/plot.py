"""The objective plot's data, shaped for the plot in SQL whatever the study's size
(docs/api.md, "The objective plot").

    points   up to `max_points` runs: every point (x, y, colour, run id, index, state, trust)
    binned   more runs than that: per x bin (and colour), count, mean, min and max of y
    heatmap  two axes as a grid: per cell, the mean of z and how many runs it holds

An axis whose values are few (a grid's parameter) keeps them as they are: its bins are its
values; otherwise its numbers are cut into `bins` equal ranges. Every aggregate is one grouped
statement: the runs are never loaded into Python, only the points or the bins answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from django.db.models import (
    Avg,
    Case,
    Count,
    FloatField,
    Func,
    IntegerField,
    JSONField,
    Max,
    Min,
    OrderBy,
    Q,
    QuerySet,
    TextField,
    Value,
    When,
)
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Floor, Least
from django.db.models.lookups import Exact

from core.exceptions import ApplicationError
from studies.models import Run, Study

DEFAULT_MAX_POINTS = 5_000
MAX_POINTS = 20_000
DEFAULT_BINS = 50
MAX_BINS = 200
#: a colour with at most this many values is a line per value; more are cut into COLOR_BINS
COLOR_VALUES = 12
COLOR_BINS = 6
KINDS = {"param": "parameters", "objective": "objectives"}

Mode = Literal["auto", "heatmap"]
_NONE = Value(None, output_field=JSONField())


@dataclass(frozen=True)
class Axis:
    """`param.NAME` or `objective.NAME`: a key of a run's parameters or objectives."""

    kind: str  # "param" | "objective"
    key: str

    @property
    def name(self) -> str:
        return f"{self.kind}.{self.key}"

    @property
    def json(self) -> KeyTransform:
        """The value as jsonb (any type)."""
        return KeyTransform(self.key, KINDS[self.kind])

    @property
    def number(self) -> Any:
        """The value as a float where it is a number, else NULL."""
        return Case(
            When(
                Exact(_Typeof(self.json), "number"),
                then=Cast(KeyTextTransform(self.key, KINDS[self.kind]), FloatField()),
            ),
            default=None,
            output_field=FloatField(),
        )

    def is_number(self) -> Exact:
        return Exact(_Typeof(self.json), "number")


class _Typeof(Func):
    function = "jsonb_typeof"
    output_field = TextField()


def plot_axis_parse(
    raw: str | None, *, field: str, parameters: list[str], objectives: list[str]
) -> Axis:
    """`param.NAME`/`objective.NAME` checked against the study; a 400 listing what exists."""
    choices = [f"param.{p}" for p in parameters] + [f"objective.{o}" for o in objectives]
    listed = ", ".join(choices) or "none"
    if not raw:
        raise ApplicationError(f"{field} is required: one of {listed}.", field=field)
    kind, dot, key = raw.partition(".")
    known = parameters if kind == "param" else objectives if kind == "objective" else None
    if not dot or known is None or not key:
        raise ApplicationError(
            f"{field}={raw!r}: write param.NAME or objective.NAME; this study has {listed}.",
            field=field,
        )
    if key not in known:
        what = "parameter" if kind == "param" else "objective"
        raise ApplicationError(
            f"{field}={raw!r}: this study has no {what} {key!r} (it has: {listed}).", field=field
        )
    return Axis(kind=kind, key=key)


@dataclass(frozen=True)
class _Cut:
    """How an axis groups: by its values (`exact`), or `bins` ranges from `low` of `width`."""

    exact: bool
    low: float = 0.0
    width: float = 1.0
    bins: int = 1

    def key(self, axis: Axis) -> Any:
        if self.exact:
            return axis.json
        return Least(
            Cast(Floor((axis.number - Value(self.low)) / Value(self.width)), IntegerField()),
            Value(self.bins - 1),
        )

    def edges(self, i: int) -> tuple[float, float]:
        return self.low + i * self.width, self.low + (i + 1) * self.width


def _cut(runs: QuerySet[Run], axis: Axis, *, limit: int, bins: int) -> _Cut:
    """Its values when there are at most `limit` of them, else `bins` ranges of its numbers."""
    stats = runs.aggregate(
        distinct=Count(axis.json, distinct=True), low=Min(axis.number), high=Max(axis.number)
    )
    if stats["distinct"] <= limit or stats["low"] is None:
        return _Cut(exact=True)
    low, high = float(stats["low"]), float(stats["high"])
    return _Cut(exact=False, low=low, width=(high - low) / bins or 1.0, bins=bins)


def _plottable(runs: QuerySet[Run], *axes: Axis, numeric: tuple[Axis, ...]) -> QuerySet[Run]:
    """The runs that have every axis (not null), and a number on each of `numeric`."""
    for axis in axes:
        runs = runs.filter(Q(**{f"{KINDS[axis.kind]}__has_key": axis.key})).exclude(
            Exact(_Typeof(axis.json), "null")
        )
    for axis in numeric:
        runs = runs.filter(axis.is_number())
    return runs


def _label(cut: _Cut, value: Any) -> dict[str, Any]:
    if cut.exact:
        return {"value": value, "low": None, "high": None}
    low, high = cut.edges(int(value))
    return {"value": (low + high) / 2, "low": low, "high": high}


def study_plot(
    *,
    study: Study,
    runs: QuerySet[Run],
    x: Axis,
    y: Axis,
    color: Axis | None = None,
    z: Axis | None = None,
    mode: Mode = "auto",
    max_points: int = DEFAULT_MAX_POINTS,
    bins: int = DEFAULT_BINS,
) -> dict[str, Any]:
    """The plot of `runs` (a study's, filtered): `y` against `x`, or `z` on an `x`×`y` grid.

    `last_seq` is the study's stream seq read first: the answer holds every change up to it
    (a page applies later events, or refetches)."""
    last_seq = Study.objects.filter(pk=study.pk).values_list("event_seq", flat=True).first()
    head: dict[str, Any] = {
        "x": x.name,
        "y": y.name,
        "color": color.name if color else None,
        "z": z.name if z else None,
        "last_seq": last_seq or 0,
    }
    if mode == "heatmap":
        if z is None:
            raise ApplicationError("a heat map needs z, e.g. z=objective.Cl.", field="z")
        return {**head, **_heatmap(runs, x=x, y=y, z=z, bins=bins)}
    runs = _plottable(runs, x, *([color] if color else []), numeric=(y,))
    total = runs.count()
    if total <= max_points:
        return {**head, "mode": "points", "total": total, **_points(runs, x=x, y=y, color=color)}
    return {
        **head,
        "mode": "binned",
        "total": total,
        **_binned(runs, x=x, y=y, color=color, bins=bins),
    }


def _points(runs: QuerySet[Run], *, x: Axis, y: Axis, color: Axis | None) -> dict[str, Any]:
    order = [OrderBy(color.json)] if color else []
    rows = (
        runs.annotate(px=x.json, py=y.number, pc=color.json if color else _NONE)
        .order_by(*order, OrderBy(x.json), "index")
        .values_list("id", "index", "px", "py", "pc", "state", "trust")
    )
    columns: dict[str, list[Any]] = {
        k: [] for k in ("run", "index", "x", "y", "color", "state", "trust")
    }
    for run_id, index, px, py, pc, state, trust in rows:
        columns["run"].append(str(run_id))
        columns["index"].append(index)
        columns["x"].append(px)
        columns["y"].append(py)
        columns["color"].append(pc)
        columns["state"].append(state)
        columns["trust"].append(trust)
    return {"points": columns, "groups": [], "heatmap": None}


def _binned(
    runs: QuerySet[Run], *, x: Axis, y: Axis, color: Axis | None, bins: int
) -> dict[str, Any]:
    xcut = _cut(runs, x, limit=bins, bins=bins)
    if not xcut.exact:
        runs = runs.filter(x.is_number())
    ccut = _cut(runs, color, limit=COLOR_VALUES, bins=COLOR_BINS) if color else None
    if color and ccut and not ccut.exact:
        runs = runs.filter(color.is_number())
    rows = (
        runs.annotate(bx=xcut.key(x), bc=ccut.key(color) if color and ccut else _NONE)
        .values("bx", "bc")
        .annotate(
            count=Count("id"),
            mean=Avg(y.number),
            min=Min(y.number),
            max=Max(y.number),
        )
        .order_by("bc", "bx")
    )
    groups: dict[str, dict[str, Any]] = {}
    for row in rows:
        c = _label(ccut, row["bc"]) if ccut else {"value": None, "low": None, "high": None}
        group = groups.setdefault(
            repr(row["bc"]),
            {"color": c["value"], "color_low": c["low"], "color_high": c["high"], "bins": []},
        )
        b = _label(xcut, row["bx"])
        group["bins"].append(
            {
                "x": b["value"],
                "x_low": b["low"],
                "x_high": b["high"],
                "count": row["count"],
                "mean": row["mean"],
                "min": row["min"],
                "max": row["max"],
            }
        )
    return {"points": None, "groups": list(groups.values()), "heatmap": None}


def _heatmap(runs: QuerySet[Run], *, x: Axis, y: Axis, z: Axis, bins: int) -> dict[str, Any]:
    runs = _plottable(runs, x, y, numeric=(z,))
    xcut = _cut(runs, x, limit=bins, bins=bins)
    ycut = _cut(runs, y, limit=bins, bins=bins)
    if not xcut.exact:
        runs = runs.filter(x.is_number())
    if not ycut.exact:
        runs = runs.filter(y.is_number())
    rows = list(
        runs.annotate(bx=xcut.key(x), by=ycut.key(y))
        .values("bx", "by")
        .annotate(count=Count("id"), mean=Avg(z.number))
        .order_by("by", "bx")
    )
    xs = _axis_values(xcut, [r["bx"] for r in rows])
    ys = _axis_values(ycut, [r["by"] for r in rows])
    column = {_key(v): i for i, v in enumerate(xs)}
    line = {_key(v): i for i, v in enumerate(ys)}
    mean: list[list[float | None]] = [[None] * len(xs) for _ in ys]
    count = [[0] * len(xs) for _ in ys]
    for r in rows:
        i, j = line[_key(r["by"])], column[_key(r["bx"])]
        mean[i][j] = r["mean"]
        count[i][j] = r["count"]
    return {
        "mode": "heatmap",
        "total": sum(r["count"] for r in rows),
        "points": None,
        "groups": [],
        "heatmap": {
            "x": [_label(xcut, v)["value"] for v in xs],
            "y": [_label(ycut, v)["value"] for v in ys],
            "x_edges": None if xcut.exact else [xcut.edges(i)[0] for i in range(xcut.bins + 1)],
            "y_edges": None if ycut.exact else [ycut.edges(i)[0] for i in range(ycut.bins + 1)],
            "mean": mean,
            "count": count,
        },
    }


def _key(value: Any) -> Any:
    # 4 and 4.0 are one jsonb value, and one cell
    return (
        float(value)
        if isinstance(value, int | float) and not isinstance(value, bool)
        else repr(value)
    )


def _axis_values(cut: _Cut, values: list[Any]) -> list[Any]:
    """The cells of an axis: its values sorted (numbers first), or every bin (empty ones too)."""
    if not cut.exact:
        return list(range(cut.bins))
    unique = {_key(v): v for v in values}
    return sorted(
        unique.values(),
        key=lambda v: (0, float(v), "") if isinstance(v, int | float) else (1, 0.0, str(v)),
    )
