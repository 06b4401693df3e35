"""The template sandbox shared by case templates and parameter expressions: Jinja's
``SandboxedEnvironment`` with ``StrictUndefined``, only ``{{ … }}`` live (block and comment
delimiters are control characters nobody writes in a text file), ``FUNCTIONS`` as the only
globals, an allow-list of filters, and budgets that refuse arithmetic able to exhaust memory
or CPU (huge powers, string/list repetition, ``%``-formatting).

Stdlib + jinja2 only: this module ships with the agent onto cluster nodes.
"""

from __future__ import annotations

import math
import numbers
import threading
from collections.abc import Mapping
from typing import Any

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from orchestration.case.casefiles import (
    RenderError,
)

_MAX_MAGNITUDE_DIGITS = 300  # results of ** above ~1e300 are refused
_MAX_SEQUENCE = 100_000  # longest string/list a `*` may build
MAX_BUILT = 1_000_000  # items all the `*`s and `string`s of one render or expression may make

# Delimiters nobody writes in a text file (control characters): only {{ }} stays live.
_BLOCK_START, _BLOCK_END = "\x02\x02%", "%\x03\x03"
_COMMENT_START, _COMMENT_END = "\x02\x02#", "#\x03\x03"


def safe_pow(base: Any, exponent: Any) -> Any:
    if isinstance(base, numbers.Real) and isinstance(exponent, numbers.Real):
        b, e = abs(float(base)), float(exponent)
        if b not in (0.0, 1.0) and math.isfinite(b) and math.isfinite(e):
            if abs(e) * abs(math.log10(b)) > _MAX_MAGNITUDE_DIGITS:
                raise RenderError(f"power {base!r} ** {exponent!r} is too large")
    try:
        return base**exponent
    except OverflowError as exc:
        raise RenderError(f"power {base!r} ** {exponent!r} overflows") from exc


class _Budget(threading.local):
    """What one render (or evaluation) may still build, per thread: repetition and `string`
    of sequences spend it, so a template of many small repetitions cannot add up to
    gigabytes."""

    left = MAX_BUILT


BUDGET = _Budget()


def _spend(items: int) -> None:
    BUDGET.left -= items
    if BUDGET.left < 0:
        raise RenderError(
            f"the placeholders build more than {MAX_BUILT:,} items in all; simplify them"
        )


def check_sequence_mul(left: Any, right: Any) -> None:
    for seq, count in ((left, right), (right, left)):
        if isinstance(seq, str | list | tuple) and isinstance(count, int):
            if len(seq) * max(count, 0) > _MAX_SEQUENCE:
                raise RenderError("repetition result too long")
            _spend(_size(seq) * max(count, 0))


def _size(value: Any, budget: int = MAX_BUILT) -> int:
    """Items in `value`, nested lists counted through (up to `budget` + 1)."""
    if isinstance(value, str):
        return len(value)
    if not isinstance(value, list | tuple):
        return 1
    total = 0
    for item in value:
        total += _size(item, budget - total) if isinstance(item, list | tuple) else 1
        if total > budget:
            break
    return total


def _string(value: Any) -> str:
    """The `string` filter, its cost counted first (`[[1]*10000]*1000|string` is 10⁷)."""
    _spend(_size(value))
    return str(value)


FUNCTIONS: dict[str, Any] = {
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "atan2": math.atan2,
    "radians": math.radians,
    "degrees": math.degrees,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "log10": math.log10,
    "pi": math.pi,
    "abs": abs,
    "min": min,
    "max": max,
    "round": round,
    "floor": math.floor,
    "ceil": math.ceil,
    "pow": safe_pow,
}

_ALLOWED_FILTERS = (
    "abs count d default first float int join last length lower max min round string sum trim upper"
).split()


class _Environment(SandboxedEnvironment):
    intercepted_binops = frozenset({"**", "*", "%"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**":
            return safe_pow(left, right)
        if operator == "*":
            check_sequence_mul(left, right)
            return left * right
        if operator == "%":
            if isinstance(left, str):
                raise SecurityError("string formatting with % is not allowed")
            return left % right
        return super().call_binop(context, operator, left, right)


def _format_value(value: Any) -> Any:
    """Render values the way OpenFOAM reads them; a value may not write a `#` (a directive
    such as #include or #codeStream that the upload's checks never saw)."""
    out = _formatted(value)
    if isinstance(out, str) and "#" in out:
        raise RenderError(
            f"a placeholder's value cannot contain '#' (OpenFOAM would read a directive such "
            f"as #include): {out[:60]!r}"
        )
    return out


def placeholder_text(value: Any) -> str:
    """What ``{{ name }}`` writes for a value `value` of its context (Jinja writes
    ``str(finalize(value))``): RenderError for a `#` or a number that is not finite."""
    kind = type(value)  # the common cases first: an ABC check costs more than the rest
    if kind is float and math.isfinite(value):
        return repr(value)
    if kind is int:
        return str(value)
    return str(_format_value(value))


def _formatted(value: Any) -> Any:
    if isinstance(value, jinja2.Undefined):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)  # numpy scalars and Decimals become plain floats
        if not math.isfinite(number):
            raise RenderError(f"value {number!r} cannot be written into a case file")
        return repr(number)
    if isinstance(value, list | tuple):
        return "(" + " ".join(str(_formatted(v)) for v in value) + ")"
    return value


def _build_environment() -> _Environment:
    env = _Environment(
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        block_start_string=_BLOCK_START,
        block_end_string=_BLOCK_END,
        comment_start_string=_COMMENT_START,
        comment_end_string=_COMMENT_END,
        line_statement_prefix=None,
        line_comment_prefix=None,
        finalize=_format_value,
    )
    env.globals.clear()
    env.globals.update(FUNCTIONS)
    env.filters = {name: env.filters[name] for name in _ALLOWED_FILTERS}
    env.filters["string"] = _string
    env.tests = {name: env.tests[name] for name in ("defined", "undefined", "number", "string")}
    return env


ENV = _build_environment()
ENV_CRLF = ENV.overlay(newline_sequence="\r\n")  # Jinja normalises newlines; keep CRLF files


def known_names(names: Mapping[str, Any]) -> str:
    return ", ".join(sorted(names)) or "(none)"
