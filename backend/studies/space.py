"""Parameter spaces: value lists, ranges, linspaces, combined as grid, zip or samples.

Pure functions, no Django. Every error is a SpaceError naming the parameter and what to fix.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from collections.abc import Collection, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

Value = float | int | str | bool


class SpaceError(ValueError):
    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclasses.dataclass(frozen=True, kw_only=True)
class Axis:
    """One parameter: either explicit values, or bounds to sample from."""

    name: str
    values: tuple[Value, ...] = ()
    low: float | None = None
    high: float | None = None
    integer: bool = False

    @property
    def sampled(self) -> bool:
        return self.low is not None


def _number(value: Any, where: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpaceError(f"{where} must be a number, got {value!r}", field=where)
    if isinstance(value, float) and not math.isfinite(value):
        raise SpaceError(f"{where} must be finite, got {value!r}", field=where)
    return value


def _clean(value: float) -> float | int:
    """Turn 0.30000000000000004 into 0.3 and 2.0 into 2 where it was meant as such."""
    value = float(value)
    if not math.isfinite(value):
        raise OverflowError(value)  # the callers name the parameter
    if abs(value) < 1e15:  # 12 decimals fit Decimal's 28 digits below that
        value = float(Decimal(repr(value)).quantize(Decimal("1e-12")).normalize())
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def _cleaned(values, where: str) -> list[float | int]:
    try:
        return [_clean(v) for v in values]
    except OverflowError:
        raise SpaceError(
            f"{where}: the values overflow (beyond ±1.8e308); use smaller numbers", field=where
        ) from None


def range_values(start: Any, stop: Any, step: Any, *, where: str) -> list[float | int]:
    start, stop, step = (_number(v, f"{where}.range") for v in (start, stop, step))
    if step == 0:
        raise SpaceError(f"{where}.range: step must not be 0", field=where)
    if (stop - start) * step < 0:
        raise SpaceError(
            f"{where}.range: step {step} never reaches stop {stop} from start {start}", field=where
        )
    span = (stop - start) / step
    if not math.isfinite(span) or span >= 1_000_000:
        raise SpaceError(
            f"{where}.range [{start}, {stop}, {step}] makes more than 1,000,000 values; "
            "use a larger step",
            field=where,
        )
    count = math.floor(span + 1e-9) + 1
    values = _cleaned((start + i * step for i in range(count)), where)
    if all(isinstance(v, int) for v in (start, stop, step)):
        values = [int(v) for v in values]
    return values


def linspace_values(start: Any, stop: Any, num: Any, *, where: str) -> list[float | int]:
    start, stop = (_number(v, f"{where}.linspace") for v in (start, stop))
    if isinstance(num, bool) or not isinstance(num, int) or num < 1:
        raise SpaceError(
            f"{where}.linspace: the count must be a whole number ≥ 1, got {num!r}", field=where
        )
    if num > 1_000_000:
        raise SpaceError(f"{where}.linspace makes {num} values; at most 1,000,000", field=where)
    if num == 1:
        return _cleaned([start], where)
    return _cleaned((start + (stop - start) * i / (num - 1) for i in range(num)), where)


def parse_axis(name: str, raw: Any, *, sampled: bool) -> Axis:
    """Parse one parameter's entry of the study spec."""
    where = f"parameters.{name}"
    if not isinstance(raw, dict):
        if isinstance(raw, list):
            return (
                Axis(name=name, values=tuple(_scalar(v, where) for v in raw))
                if raw
                else _empty(where)
            )
        return Axis(name=name, values=(_scalar(raw, where),))
    keys = set(raw) - {"type"}
    forms = keys & {"values", "value", "range", "linspace", "min", "max"}
    if not forms:
        raise SpaceError(
            f"{where}: give one of values, value, range [start, stop, step], linspace [start, stop, count], "
            "or min/max (for sampled studies)",
            field=where,
        )
    unknown = keys - {"values", "value", "range", "linspace", "min", "max", "integer"}
    if unknown:
        raise SpaceError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}", field=where)
    if "min" in raw or "max" in raw:
        if not sampled:
            raise SpaceError(
                f"{where}: min/max bounds are for sampled studies (combine: lhs, random or "
                "adaptive); "
                "use range or linspace for a grid",
                field=where,
            )
        if "min" not in raw or "max" not in raw:
            raise SpaceError(f"{where}: sampling needs both min and max", field=where)
        low, high = _number(raw["min"], f"{where}.min"), _number(raw["max"], f"{where}.max")
        if low > high:
            raise SpaceError(f"{where}: min {low} is above max {high}", field=where)
        return Axis(
            name=name, low=float(low), high=float(high), integer=bool(raw.get("integer", False))
        )
    if len(forms) > 1:
        raise SpaceError(f"{where}: give only one of {', '.join(sorted(forms))}", field=where)
    if "value" in raw:
        return Axis(name=name, values=(_scalar(raw["value"], where),))
    if "values" in raw:
        values = raw["values"]
        if not isinstance(values, list):
            raise SpaceError(f"{where}.values must be a list", field=where)
        if not values:
            return _empty(where)
        return Axis(name=name, values=tuple(_scalar(v, where) for v in values))
    key = "range" if "range" in raw else "linspace"
    triple = raw[key]
    if not isinstance(triple, list) or len(triple) != 3:
        shape = "[start, stop, step]" if key == "range" else "[start, stop, count]"
        raise SpaceError(f"{where}.{key} must be a list {shape}", field=where)
    make = range_values if key == "range" else linspace_values
    return Axis(name=name, values=tuple(make(*triple, where=where)))


def _empty(where: str) -> Axis:
    raise SpaceError(f"{where}: the list of values is empty; give at least one value", field=where)


_UNSAFE_TEXT = frozenset('"#$;{}\\') | {chr(c) for c in range(32)} | {"\x7f"}


def _scalar(value: Any, where: str) -> Value:
    if isinstance(value, str):
        # a text value is written into the case's dictionaries: nothing that could end a
        # string or an entry, or start a directive (#include) or a $variable
        bad = sorted({c for c in value if c in _UNSAFE_TEXT})
        if bad or len(value) > 200:
            shown = " ".join(repr(c) for c in bad)
            raise SpaceError(
                f"{where}: text values are at most 200 characters, without quotes, #, $, ;, "
                f"braces, backslashes or control characters (they would change the case's "
                f"syntax); {value[:40]!r} has {shown or 'too many characters'}",
                field=where,
            )
        return value
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SpaceError(f"{where}: values must be finite, got {value!r}", field=where)
        return value
    raise SpaceError(f"{where}: values must be numbers or strings, got {value!r}", field=where)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Space:
    axes: tuple[Axis, ...]
    combine: str = "grid"
    samples: int = 0
    seed: int = 0

    def count(self) -> int:
        if not self.axes:
            return 1
        if self.combine == "grid":
            return math.prod(len(a.values) for a in self.axes)
        if self.combine == "zip":
            return len(self.axes[0].values)
        return self.samples

    def combinations(
        self, names: Collection[str]
    ) -> tuple[int, Iterator[tuple[int, dict[str, Value]]]]:
        """The distinct combinations of the values of the parameters `names`, each as the
        first run (its index and point) that has it, in the runs' order, and how many there
        are. In a grid they are the product of those parameters' values (the others at their
        first value): counted, and made, without the rest of the grid. In a zip or a sampled
        space the parameters change together: every run."""
        if self.combine != "grid" or not self.axes:
            return self.count(), enumerate(self.points())
        axes = self.axes
        strides = [math.prod(len(a.values) for a in axes[k + 1 :]) for k in range(len(axes))]
        varied = [k for k, a in enumerate(axes) if a.name in names]

        def made() -> Iterator[tuple[int, dict[str, Value]]]:
            for combo in itertools.product(*(range(len(axes[k].values)) for k in varied)):
                at = [0] * len(axes)
                for k, i in zip(varied, combo, strict=True):
                    at[k] = i
                index = sum(i * stride for i, stride in zip(at, strides, strict=True))
                yield index, {a.name: a.values[i] for a, i in zip(axes, at, strict=True)}

        return math.prod(len(axes[k].values) for k in varied), made()

    def points(self) -> Iterator[dict[str, Value]]:
        names = [a.name for a in self.axes]
        if self.combine == "grid":
            for combo in itertools.product(*(a.values for a in self.axes)):
                yield dict(zip(names, combo, strict=True))
        elif self.combine == "zip":
            for combo in zip(*(a.values for a in self.axes), strict=True):
                yield dict(zip(names, combo, strict=True))
        else:
            yield from self._sample()

    def _sample(self) -> Iterator[dict[str, Value]]:
        """The sampled design, a row at a time: each sampled parameter's draws are made up
        front (the seed's sequence: a Latin hypercube shuffles all its strata), each value
        is rounded (to 12 decimals, or to a whole number) only when its row is taken, so the
        first rows cost little whatever the number of samples."""
        rng = random.Random(self.seed)
        n = self.samples
        fixed: dict[str, Value] = {}
        drawn: dict[str, tuple[Axis, list[float]]] = {}
        for axis in self.axes:
            if not axis.sampled:
                fixed[axis.name] = axis.values[0]
                continue
            assert axis.low is not None and axis.high is not None
            if self.combine in ("lhs", "adaptive"):  # adaptive: its initial design
                # one sample in each of n equal strata, strata shuffled per axis
                units = [(i + rng.random()) / n for i in range(n)]
                rng.shuffle(units)
            else:
                units = [rng.random() for _ in range(n)]
            width = axis.high - axis.low
            if not math.isfinite(width):
                raise SpaceError(
                    f"parameters.{axis.name}: min {axis.low} to max {axis.high} overflows; "
                    "use smaller bounds",
                    field=f"parameters.{axis.name}",
                )
            drawn[axis.name] = (axis, units)
        names = [a.name for a in self.axes]
        for i in range(n):
            row: dict[str, Value] = {}
            for name in names:
                if name in fixed:
                    row[name] = fixed[name]
                    continue
                axis, units = drawn[name]
                assert axis.low is not None and axis.high is not None
                value = axis.low + units[i] * (axis.high - axis.low)
                row[name] = (
                    int(round(value))
                    if axis.integer
                    else _cleaned((value,), f"parameters.{name}")[0]
                )
            yield row

    def constants(self) -> dict[str, Value]:
        """The parameters of a sampled study given one value: the same in every run."""
        return {a.name: a.values[0] for a in self.axes if not a.sampled}


def parse_space(
    parameters: Mapping[str, Any], *, combine: Any = "grid", samples: Any = None, seed: Any = None
) -> Space:
    if not isinstance(parameters, Mapping):
        raise SpaceError("parameters must be a mapping of name → values", field="parameters")
    if combine not in ("grid", "zip", "lhs", "random", "adaptive"):
        raise SpaceError(
            f"combine must be grid, zip, lhs, random or adaptive, got {combine!r}", field="combine"
        )
    sampled = combine in ("lhs", "random", "adaptive")
    axes = tuple(parse_axis(str(name), raw, sampled=sampled) for name, raw in parameters.items())
    n_samples = 0
    if sampled:
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
            raise SpaceError(
                f"combine: {combine} needs samples: a whole number ≥ 1", field="samples"
            )
        n_samples = samples
        for axis in axes:
            if combine == "adaptive":
                _check_adaptive_axis(axis)
            if not axis.sampled and len(axis.values) != 1:
                raise SpaceError(
                    f"parameters.{axis.name}: in a sampled study each parameter is min/max bounds "
                    "or a single value",
                    field=f"parameters.{axis.name}",
                )
    if combine == "adaptive" and not any(a.sampled for a in axes):
        raise SpaceError(
            "combine: adaptive needs at least one parameter with min/max bounds to sample",
            field="parameters",
        )
    elif combine == "zip" and axes:
        lengths = {a.name: len(a.values) for a in axes}
        longer = {n for n in lengths.values() if n > 1}
        if len(longer) > 1:
            detail = ", ".join(f"{k}: {v}" for k, v in lengths.items())
            raise SpaceError(
                f"combine: zip needs lists of the same length (a single value is used in every "
                f"run), got {detail}",
                field="parameters",
            )
        if longer:  # a single value goes with every tuple
            (n,) = longer
            axes = tuple(
                dataclasses.replace(a, values=a.values * n) if len(a.values) == 1 else a
                for a in axes
            )
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise SpaceError("seed must be a whole number", field="seed")
    return Space(axes=axes, combine=combine, samples=n_samples, seed=seed or 0)


def _check_adaptive_axis(axis: Axis) -> None:
    """An adaptive study's surrogate learns over numeric ranges: text values and a range of
    one point cannot be sampled."""
    where = f"parameters.{axis.name}"
    if axis.sampled:
        if axis.low == axis.high:
            raise SpaceError(
                f"{where}: min and max are both {axis.low:g}: adaptive sampling needs a range "
                "(min below max); give a single value instead to hold it fixed",
                field=where,
            )
        return
    if len(axis.values) > 1 and any(isinstance(v, str) for v in axis.values):
        raise SpaceError(
            f"{where}: adaptive sampling learns over numbers; a text parameter cannot be "
            "sampled. Give it one value, or run one adaptive study per value",
            field=where,
        )


def point_key(point: Mapping[str, Any], names: Sequence[str]) -> tuple:
    """A hashable identity of a point, tolerant of 4 vs 4.0."""
    out = []
    for name in names:
        v = point.get(name)
        out.append(float(v) if isinstance(v, int | float) and not isinstance(v, bool) else v)
    return tuple(out)
