"""Filters and sort orders on a set of runs that go beyond a column: parameter and objective
ranges, and sorting by a parameter or an objective (docs/api.md, "Runs: filter and sort").

    ?param=aoa:2..8          aoa between 2 and 8 (inclusive); `aoa:2..` or `aoa:..8` one side
    ?param=mesh:fine         a parameter equal to a value (a number when it reads as one)
    ?objective=Cl:0.5..      the same on the runs' objectives
    ?ordering=-objective.Cl  sort (a `-` for descending) by a column, a parameter or an objective

Values live in JSON columns (`parameters`, `objectives`): comparisons are jsonb comparisons,
numeric for numbers, and a range matches numbers only. All of it is SQL: the set is never
loaded into Python, whatever its size.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import F, Func, JSONField, OrderBy, QuerySet, TextField, Value
from django.db.models.fields.json import (
    KeyTransform,
    KeyTransformExact,
    KeyTransformGte,
    KeyTransformLte,
)
from django.db.models.lookups import Exact

from core.exceptions import ApplicationError
from studies.models import Run

#: the run columns a list may be sorted by (with `-` for descending)
ORDER_COLUMNS = (
    "index",
    "state",
    "trust",
    "queued_at",
    "started_at",
    "finished_at",
    "iterations",
    "cpu_percent",
    "rss_bytes",
    "peak_memory_bytes",
    "cpu_seconds",
)
#: the JSON columns a filter or a sort may name a key of, as the API spells them
JSON_COLUMNS = {"param": "parameters", "objective": "objectives"}
MAX_TERMS = 20


@dataclass(frozen=True)
class Term:
    """One `param=`/`objective=` filter: a range (`low`/`high`, either None) or an equality."""

    column: str  # "parameters" | "objectives"
    key: str
    low: float | None = None
    high: float | None = None
    equals: Any = None


class _JsonbTypeof(Func):
    function = "jsonb_typeof"
    output_field = TextField()


def _number(text: str, *, field: str, term: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ApplicationError(
            f"{term!r}: {text!r} is not a number. A range is written NAME:LOW..HIGH with numbers, "
            f"e.g. {field}=aoa:2..8.",
            field=field,
        )
    return value


def _literal(text: str) -> Any:
    try:
        value = float(text)
    except ValueError:
        return text
    if not math.isfinite(value):
        return text
    return (
        int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value
    )


def run_terms_parse(raw: Iterable[str], *, field: str, known: Sequence[str] | None) -> list[Term]:
    """`param=`/`objective=` values as terms; a 400 naming the mistake for a malformed one.

    `known`: the names the study has (None: any name, e.g. across studies)."""
    terms: list[Term] = []
    for text in raw:
        name, sep, rest = text.partition(":")
        name = name.strip()
        if not sep or not name or rest == "":
            raise ApplicationError(
                f"{field}={text!r}: write NAME:LOW..HIGH for a range or NAME:VALUE for a value, "
                f"e.g. {field}=aoa:2..8 or {field}=aoa:4.",
                field=field,
            )
        if known is not None and name not in known:
            names = ", ".join(known) or "none"
            raise ApplicationError(
                f"{field}={text!r}: this study has no {'parameter' if field == 'param' else 'objective'} "
                f"{name!r} (it has: {names}).",
                field=field,
            )
        column = JSON_COLUMNS[field]
        if ".." in rest:
            low_text, _, high_text = rest.partition("..")
            low = _number(low_text, field=field, term=text) if low_text.strip() else None
            high = _number(high_text, field=field, term=text) if high_text.strip() else None
            if low is None and high is None:
                raise ApplicationError(
                    f"{field}={text!r}: a range needs at least one bound, e.g. {name}:2.. or {name}:..8.",
                    field=field,
                )
            if low is not None and high is not None and low > high:
                raise ApplicationError(
                    f"{field}={text!r}: the low bound is above the high one.", field=field
                )
            terms.append(Term(column=column, key=name, low=low, high=high))
        else:
            terms.append(Term(column=column, key=name, equals=_literal(rest)))
    if len(terms) > MAX_TERMS:
        raise ApplicationError(f"At most {MAX_TERMS} {field}= filters at once.", field=field)
    return terms


def _jsonb(value: Any) -> Value:
    # jsonb against jsonb: numbers compare as numbers (4 = 4.0), strings as strings; a bare
    # numeric has no jsonb operator
    return Value(value, output_field=JSONField())


def run_terms_apply(queryset: QuerySet[Run], terms: Sequence[Term]) -> QuerySet[Run]:
    # lookups as expressions, not `parameters__<key>__gte=` keywords: a key may hold `__`
    for term in terms:
        value = KeyTransform(term.key, term.column)
        if term.equals is not None:
            queryset = queryset.filter(KeyTransformExact(value, _jsonb(term.equals)))
            continue
        queryset = queryset.filter(Exact(_JsonbTypeof(value), "number"))
        if term.low is not None:
            queryset = queryset.filter(KeyTransformGte(value, _jsonb(term.low)))
        if term.high is not None:
            queryset = queryset.filter(KeyTransformLte(value, _jsonb(term.high)))
    return queryset


def run_ordering_apply(
    queryset: QuerySet[Run],
    raw: str | None,
    *,
    parameters: Sequence[str] | None,
    objectives: Sequence[str] | None,
) -> QuerySet[Run]:
    """`ordering=` (comma-separated) applied; ties by index, then id, so pages never overlap."""
    if not raw:
        return queryset
    order: list[Any] = []
    for part in raw.split(","):
        item = part.strip()
        descending = item.startswith("-")
        name = item.lstrip("-")
        kind, dot, key = name.partition(".")
        if dot and kind in JSON_COLUMNS and key:
            known = parameters if kind == "param" else objectives
            if known is not None and key not in known:
                raise ApplicationError(
                    f"ordering={raw!r}: this study has no "
                    f"{'parameter' if kind == 'param' else 'objective'} {key!r} "
                    f"(it has: {', '.join(known) or 'none'}).",
                    field="ordering",
                )
            # jsonb sorts numbers numerically (and null/missing last when ascending)
            expr: Any = KeyTransform(key, JSON_COLUMNS[kind])
            order.append(OrderBy(expr, descending=descending, nulls_last=True))
        elif name in ORDER_COLUMNS:
            order.append(OrderBy(F(name), descending=descending, nulls_last=True))
        else:
            raise ApplicationError(
                f"ordering={raw!r}: cannot sort by {name!r}. Sort by one of "
                f"{', '.join(ORDER_COLUMNS)}, param.NAME or objective.NAME (a leading - for "
                "descending), comma-separated.",
                field="ordering",
            )
    if len(order) > 4:
        raise ApplicationError("ordering: at most 4 sort keys.", field="ordering")
    return queryset.order_by(*order, "index", "id")
