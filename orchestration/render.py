"""Sandboxed case rendering and parameter expressions.

Shared by the portal (template validation, derived values) and the run agent (rendering a
case before it runs). Only ``{{ … }}`` is template syntax: Jinja's block and comment
delimiters are set to strings that never occur in text files, so OpenFOAM's own ``{``,
``}``, ``#include``, ``#{ … #}`` and ``{#`` pass through untouched. A literal ``{{`` is
written ``{{ '{{' }}``.

Expressions use Jinja's expression grammar (not Python's): ``**`` is left-associative
(``2**3**2 == 64``) and ``~`` concatenates strings. Everything runs in
``jinja2.sandbox.SandboxedEnvironment`` with ``StrictUndefined``; globals are only
``FUNCTIONS``; filters are a small allow-list; arithmetic that could exhaust memory or CPU
(huge powers, string/list repetition, ``%``-formatting) is refused.

Stdlib + jinja2 only: this module ships with the agent onto cluster nodes.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
import operator
import os
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jinja2
import jinja2.meta
import jinja2.runtime
from jinja2 import nodes
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from orchestration.casefiles import (
    MAX_TEMPLATE_BYTES,
    RenderError,
    copy_case,
    is_binary_file,
    read_template,
    walk,
)

__all__ = [
    "FUNCTIONS",
    "MAX_EXPRESSION_LENGTH",
    "MAX_TEMPLATE_BYTES",
    "DerivedError",
    "RenderError",
    "evaluate",
    "evaluate_derived",
    "expression_names",
    "find_placeholders",
    "is_binary_file",
    "render_case",
    "render_files",
    "render_text",
]

MAX_EXPRESSION_LENGTH = 500
MAX_DERIVED = 200  # derived values of one study
_MEMO_MAX = 20_000  # derived values evaluate_derived remembers across a study's runs
_MAX_MAGNITUDE_DIGITS = 300  # results of ** above ~1e300 are refused
_MAX_SEQUENCE = 100_000  # longest string/list a `*` may build
_MAX_BUILT = 1_000_000  # items all the `*`s and `string`s of one render or expression may make
_MAX_NESTING = 50  # brackets inside brackets of one expression
# text ending in '#' and a partial directive name, right before a placeholder
_DIRECTIVE_START = re.compile(r"#[A-Za-z_]*\Z")

# Delimiters nobody writes in a text file (control characters): only {{ }} stays live.
_BLOCK_START, _BLOCK_END = "\x02\x02%", "%\x03\x03"
_COMMENT_START, _COMMENT_END = "\x02\x02#", "#\x03\x03"


def _safe_pow(base: Any, exponent: Any) -> Any:
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

    left = _MAX_BUILT


_BUDGET = _Budget()


def _spend(items: int) -> None:
    _BUDGET.left -= items
    if _BUDGET.left < 0:
        raise RenderError(
            f"the placeholders build more than {_MAX_BUILT:,} items in all; simplify them"
        )


def _check_sequence_mul(left: Any, right: Any) -> None:
    for seq, count in ((left, right), (right, left)):
        if isinstance(seq, str | list | tuple) and isinstance(count, int):
            if len(seq) * max(count, 0) > _MAX_SEQUENCE:
                raise RenderError("repetition result too long")
            _spend(_size(seq) * max(count, 0))


def _size(value: Any, budget: int = _MAX_BUILT) -> int:
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
    "pow": _safe_pow,
}

_ALLOWED_FILTERS = (
    "abs count d default first float int join last length lower max min round string sum trim upper"
).split()


class _Environment(SandboxedEnvironment):
    intercepted_binops = frozenset({"**", "*", "%"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**":
            return _safe_pow(left, right)
        if operator == "*":
            _check_sequence_mul(left, right)
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


_ENV = _build_environment()
_ENV_CRLF = _ENV.overlay(newline_sequence="\r\n")  # Jinja normalises newlines; keep CRLF files


def _known(names: Mapping[str, Any]) -> str:
    return ", ".join(sorted(names)) or "(none)"


def _parse_expression(expr: str) -> nodes.Expr:
    if not isinstance(expr, str) or not expr.strip():
        raise RenderError(f"empty expression {expr!r}")
    if len(expr) > MAX_EXPRESSION_LENGTH:
        raise RenderError(
            f"expression is {len(expr)} characters long; the limit is {MAX_EXPRESSION_LENGTH}"
        )
    _check_nesting(expr, f"expression {expr!r}")
    try:
        parser = jinja2.parser.Parser(_ENV, expr, state="variable")
        node = parser.parse_expression()
        if not parser.stream.eos:
            token = parser.stream.current
            raise RenderError(
                f"syntax error in expression {expr!r}: unexpected {token.value!r} "
                "after a complete expression"
            )
    except jinja2.TemplateSyntaxError as exc:
        raise RenderError(f"syntax error in expression {expr!r}: {exc.message}") from exc
    return node


def _check_nesting(text: str, what: str) -> None:
    """Brackets nested deeper than _MAX_NESTING would exhaust the parser's recursion."""
    depth = deepest = 0
    for char in text:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth = max(depth - 1, 0)
    if deepest > _MAX_NESTING:
        raise RenderError(f"{what} nests brackets {deepest} deep; at most {_MAX_NESTING}")


def _only_placeholders(tree: nodes.Template, filename: str) -> None:
    """Only {{ … }} is template syntax: a block statement (a loop, a macro, an assignment)
    written with the internal delimiters is refused, not run."""
    for node in tree.body:
        if not isinstance(node, nodes.Output):
            where = _where(filename, node.lineno)
            raise RenderError(
                f"{where}: only {{{{ … }}}} placeholders are template syntax "
                f"({type(node).__name__.lower()} statements are not allowed)"
            )
        # `#{{ 'include' }}`, `#inc{{ x }}`: a placeholder may not finish a directive's name
        for before, after in itertools.pairwise(node.nodes):
            if (
                isinstance(before, nodes.TemplateData)
                and not isinstance(after, nodes.TemplateData)
                and _DIRECTIVE_START.search(before.data)
            ):
                raise RenderError(
                    f"{_where(filename, after.lineno)}: a placeholder cannot follow '#': "
                    "OpenFOAM directives (#include, #codeStream, …) are written out in full"
                )


def _names_in(node: nodes.Node) -> set[str]:
    found = [node, *node.find_all(nodes.Name)] if isinstance(node, nodes.Name) else []
    found = found or list(node.find_all(nodes.Name))
    return {n.name for n in found if n.ctx == "load"}


@functools.lru_cache(maxsize=1024)
def _expression_names(expr: str) -> frozenset[str]:
    return frozenset(_names_in(_parse_expression(expr)))


class _Expression:
    """A compiled expression, called with a plain dict of names.

    jinja's own TemplateExpression copies the environment's globals out of a ChainMap on
    every call (twice), which was ~80 % of a call's cost: 100,000 runs with two derived
    values took 17 s to resolve. Here the globals are copied once, and each call builds its
    context from one dict merge; the compiled code, and so the sandbox's checks, are jinja's."""

    def __init__(self, expr: str) -> None:
        self._template = _ENV.compile_expression(expr, undefined_to_none=False)._template
        self._globals = dict(self._template.globals)

    def __call__(self, names: Mapping[str, Any]) -> Any:
        template = self._template
        context = jinja2.runtime.new_context(
            _ENV, template.name, template.blocks, {**self._globals, **names}, shared=True
        )
        for _ in template.root_render_func(context):
            pass
        return context.vars["result"]


def _mul(left: Any, right: Any) -> Any:
    _check_sequence_mul(left, right)  # as the sandbox's `*`
    return left * right


def _mod(left: Any, right: Any) -> Any:
    if isinstance(left, str):  # as the sandbox's `%`
        raise SecurityError("string formatting with % is not allowed")
    return left % right


# the sandbox's own meaning of each operator (intercepted ones through the same checks)
_BINARY: dict[type[nodes.BinExpr], Callable[[Any, Any], Any]] = {
    nodes.Add: operator.add,
    nodes.Sub: operator.sub,
    nodes.Mul: _mul,
    nodes.Div: operator.truediv,
    nodes.FloorDiv: operator.floordiv,
    nodes.Mod: _mod,
    nodes.Pow: lambda left, right: _safe_pow(left, right),
}
_UNARY: dict[type[nodes.UnaryExpr], Callable[[Any], Any]] = {
    nodes.Neg: operator.neg,
    nodes.Pos: operator.pos,
}

_Compiled = Callable[[Mapping[str, Any]], Any]


def _arithmetic(node: nodes.Node) -> _Compiled | None:
    """The expression as plain Python closures when it is only arithmetic: numbers, names,
    + - * / // % ** and calls of FUNCTIONS by name with positional arguments, each operator
    with the sandbox's own checks. None for anything else (attributes, items, filters,
    tests, strings, comparisons, …): those take the sandbox. A derived value such as
    `courant * (0.1 / cells) / lid_velocity` is evaluated for every run of a study: this is
    ~5× cheaper than rendering a jinja context for it."""
    if isinstance(node, nodes.Const) and type(node.value) in (int, float):
        value = node.value
        return lambda names: value
    if isinstance(node, nodes.Name) and node.ctx == "load":
        name = node.name

        def load(names: Mapping[str, Any]) -> Any:
            return names[name] if name in names else FUNCTIONS[name]

        return load
    if type(node) in _BINARY:
        fn = _BINARY[type(node)]  # type: ignore[index]
        left, right = _arithmetic(node.left), _arithmetic(node.right)  # type: ignore[attr-defined]
        if left is None or right is None:
            return None
        return lambda names: fn(left(names), right(names))
    if type(node) in _UNARY:
        un = _UNARY[type(node)]  # type: ignore[index]
        inner = _arithmetic(node.node)  # type: ignore[attr-defined]
        return None if inner is None else (lambda names: un(inner(names)))
    if (
        isinstance(node, nodes.Call)
        and isinstance(node.node, nodes.Name)
        and node.node.name in FUNCTIONS
        and not node.kwargs
        and node.dyn_args is None
        and node.dyn_kwargs is None
    ):
        function = node.node.name
        args = [_arithmetic(a) for a in node.args]
        if any(a is None for a in args):
            return None
        parts = tuple(a for a in args if a is not None)

        def call(names: Mapping[str, Any]) -> Any:
            # a parameter may shadow a function's name, as in the sandbox's scope
            fn = names[function] if function in names else FUNCTIONS[function]
            return fn(*(a(names) for a in parts))

        return call
    return None


@functools.lru_cache(maxsize=1024)
def _compiled(expr: str) -> _Compiled:
    fast = _arithmetic(_parse_expression(expr))
    return fast if fast is not None else _Expression(expr)


def expression_names(expr: str) -> set[str]:
    """Names `expr` uses that are not in FUNCTIONS (raises RenderError on a syntax error)."""
    return set(_expression_names(expr)) - FUNCTIONS.keys()


def evaluate(expr: str, names: Mapping[str, Any]) -> Any:
    """Evaluate one expression in the sandbox with `names` (plus FUNCTIONS) in scope."""
    unknown = sorted(_expression_names(expr) - FUNCTIONS.keys() - names.keys())
    if unknown:
        raise RenderError(
            f"unknown name {unknown[0]!r} in expression {expr!r}; known names: {_known(names)}"
        )
    return _run_compiled(expr, _compiled(expr), names)


def _run_compiled(expr: str, compiled: _Compiled, names: Mapping[str, Any]) -> Any:
    """`compiled` (the expression `expr`) called with `names`, its failures as RenderErrors."""
    _BUDGET.left = _MAX_BUILT
    try:
        result = compiled(names)
    except (RecursionError, MemoryError, SyntaxError) as exc:
        raise RenderError(f"expression {expr!r} is too complex ({exc})") from exc
    except jinja2.TemplateSyntaxError as exc:
        raise RenderError(f"invalid expression {expr!r}: {exc.message}") from exc
    except RenderError as exc:
        raise RenderError(f"cannot evaluate {expr!r}: {exc}") from exc
    except jinja2.UndefinedError as exc:
        raise RenderError(f"cannot evaluate {expr!r}: {exc.message}") from exc
    except SecurityError as exc:
        raise RenderError(f"expression {expr!r} is not allowed: {exc}") from exc
    except (ArithmeticError, TypeError, ValueError) as exc:
        raise RenderError(f"cannot evaluate {expr!r}: {type(exc).__name__}: {exc}") from exc
    if isinstance(result, jinja2.Undefined):
        raise RenderError(f"expression {expr!r} has no value")
    return result


@functools.lru_cache(maxsize=256)
def _derived_order(derived: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """The derived values' names in dependency order (raises RenderError on a cycle)."""
    exprs = dict(derived)
    deps = {name: expression_names(expr) & exprs.keys() for name, expr in exprs.items()}
    order: list[str] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = path[path.index(name) :] + [name]
            raise RenderError(f"cycle in derived values: {' -> '.join(cycle)}")
        state[name] = 1
        for dep in sorted(deps[name]):
            visit(dep, [*path, name])
        state[name] = 2
        order.append(name)

    for name in sorted(exprs):
        visit(name, [])
    return tuple(order)


class _Step(NamedTuple):
    """One derived value as a study evaluates it for every run: compiled once."""

    name: str
    expr: str
    compiled: _Compiled
    names: tuple[str, ...]  # every name the expression uses, sorted (the memo's key)
    free: tuple[str, ...]  # those that must be in scope (not FUNCTIONS)


@functools.lru_cache(maxsize=256)
def _derived_plan(derived: tuple[tuple[str, str], ...]) -> tuple[_Step, ...]:
    """The derived values in dependency order, each compiled, with the names it uses."""
    exprs = dict(derived)
    plan = []
    for name in _derived_order(derived):
        used = _expression_names(exprs[name])
        plan.append(
            _Step(
                name=name,
                expr=exprs[name],
                compiled=_compiled(exprs[name]),
                names=tuple(sorted(used)),
                free=tuple(sorted(used - FUNCTIONS.keys())),
            )
        )
    return tuple(plan)


_ABSENT = object()  # a name the scope does not have (a function's), in a memo key
_MEMO_TRIAL = 1024  # lookups before a derived value that rarely repeats stops being remembered


def evaluate_derived(
    derived: Mapping[str, str],
    values: Mapping[str, Any],
    memo: dict[Any, Any] | None = None,
) -> dict[str, Any]:
    """Evaluate derived expressions in dependency order; returns only the derived values.

    A derived expression may use parameters (`values`) and other derived values. A derived
    name takes precedence over a parameter of the same name. Cycles raise RenderError.

    `memo`, one dict kept across the runs of a study, remembers each value by the values of
    the names its expression uses: in a sweep most derived values depend on one or two axes
    (or on none), so 100,000 runs evaluate each distinct input once. A value whose inputs
    rarely repeat (one per run, as `1 / lid_velocity` over a linspace) stops being
    remembered after a trial: its key would cost more than the arithmetic.
    """
    if len(derived) > MAX_DERIVED:
        raise RenderError(f"{len(derived)} derived values; at most {MAX_DERIVED}")
    plan = _derived_plan(tuple(sorted(derived.items())))  # the same for every run of a study
    scope: dict[str, Any] = dict(values)
    result: dict[str, Any] = {}
    for step in plan:
        name = step.name
        key = None
        stats = memo.get((_ABSENT, name)) if memo is not None else None
        if memo is not None and stats is not False:
            inputs = tuple(scope.get(n, _ABSENT) for n in step.names)
            key = (name, inputs, tuple(map(type, inputs)))
            try:
                found = memo.get(key, _ABSENT)
            except TypeError:  # a list among the inputs: not a key
                key, found = None, _ABSENT
            if stats is None:
                stats = memo[(_ABSENT, name)] = [0, 0]  # lookups, hits
            stats[0] += 1
            if found is not _ABSENT:
                stats[1] += 1
                scope[name] = result[name] = found
                continue
            if stats[0] >= _MEMO_TRIAL and stats[1] * 4 < stats[0]:
                memo[(_ABSENT, name)] = False  # mostly new inputs: evaluate from now on
        try:
            if any(n not in scope for n in step.free):
                value = evaluate(step.expr, scope)  # raises, naming the unknown name
            else:
                value = _run_compiled(step.expr, step.compiled, scope)
        except RenderError as exc:
            raise DerivedError(name, f"derived value {name!r}: {exc}") from exc
        if isinstance(value, float) and not math.isfinite(value):
            raise DerivedError(
                name,
                f"derived value {name!r} = {step.expr} is {value}, not a finite number "
                "(an overflow or an undefined result); change the expression or the values",
            )
        scope[name] = result[name] = value
        if key is not None and memo is not None:
            if len(memo) >= _MEMO_MAX:  # values that never repeat (one per run): start over
                memo.clear()
            memo[key] = value
    return result


class DerivedError(RenderError):
    """A derived value that cannot be computed; `name` says which."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


def _where(filename: str, lineno: int | None) -> str:
    label = filename or "<template>"
    return f"{label} line {lineno}" if lineno else label


def _parse_template(text: str, filename: str) -> nodes.Template:
    """Parse and compile-check `text` (unknown filters are found at compile time)."""
    try:
        tree = _ENV.parse(text)
        _only_placeholders(tree, filename)
        _ENV.compile(tree)
    except jinja2.TemplateSyntaxError as exc:
        where = _where(filename, exc.lineno)
        raise RenderError(f"{where}: template syntax error: {exc.message}") from None
    except (RecursionError, MemoryError, SyntaxError) as exc:
        raise RenderError(f"{_where(filename, None)}: placeholders too complex ({exc})") from None
    return tree


_CACHED_TEMPLATE_CHARS = 256 * 1024  # larger texts are compiled for each render


@functools.lru_cache(maxsize=256)
def _template(text: str, crlf: bool) -> tuple[jinja2.Template, tuple[tuple[str, int], ...]]:
    """The compiled template and the names it loads (with their lines), in order."""
    env = _ENV_CRLF if crlf else _ENV
    tree = env.parse(text)
    _only_placeholders(tree, "")
    names = tuple(
        (node.name, node.lineno) for node in tree.find_all(nodes.Name) if node.ctx == "load"
    )
    return env.from_string(tree), names


def render_text(text: str, context: Mapping[str, Any], *, filename: str = "") -> str:
    """Render the `{{ … }}` placeholders of `text` with `context` (plus FUNCTIONS)."""
    crlf = "\r\n" in text
    try:  # parsed and compiled once per text (every run of a study renders every template)
        if len(text) <= _CACHED_TEMPLATE_CHARS:
            template, names = _template(text, crlf)
        else:
            template, names = _template.__wrapped__(text, crlf)
    except jinja2.TemplateSyntaxError as exc:
        where = _where(filename, exc.lineno)
        raise RenderError(f"{where}: template syntax error: {exc.message}") from None
    except RenderError as exc:
        raise RenderError(str(exc).replace("<template>", filename or "<template>", 1)) from None
    except (RecursionError, MemoryError, SyntaxError) as exc:
        raise RenderError(f"{_where(filename, None)}: placeholders too complex ({exc})") from None
    for name, lineno in names:
        if name not in context and name not in FUNCTIONS:
            raise RenderError(
                f"{_where(filename, lineno)}: unknown name {name!r}; known names: {_known(context)}"
            )
    _BUDGET.left = _MAX_BUILT
    try:
        return template.render(**context)
    except RenderError as exc:
        raise RenderError(f"{_where(filename, None)}: {exc}") from exc
    except jinja2.UndefinedError as exc:
        raise RenderError(f"{_where(filename, None)}: {exc.message}") from exc
    except SecurityError as exc:
        raise RenderError(f"{_where(filename, None)}: not allowed: {exc}") from exc
    except (ArithmeticError, TypeError, ValueError) as exc:
        raise RenderError(f"{_where(filename, None)}: {type(exc).__name__}: {exc}") from exc


def find_placeholders(case_dir: Path) -> dict[str, list[str]]:
    """Relative path → sorted placeholder names, for every text file that contains `{{`."""
    result: dict[str, list[str]] = {}
    for path, rel in walk(Path(case_dir)):
        text = read_template(path)
        if text is None:
            continue
        tree = _parse_template(text, rel)
        result[rel] = sorted(jinja2.meta.find_undeclared_variables(tree) - FUNCTIONS.keys())
    return result


def render_case(
    src: str | os.PathLike[str], dst: str | os.PathLike[str], context: Mapping[str, Any]
) -> list[str]:
    """Copy the case tree `src` to `dst` rendering text files with `{{`; return those paths.

    `dst` must not exist or be empty. Symbolic links and special files in `src` are errors.
    """

    def text_of(path: str, rel: str) -> str | None:
        text = read_template(path)
        return None if text is None else render_text(text, context, filename=rel)

    return copy_case(src, dst, text_of)


def render_files(src: Path, context: Mapping[str, Any]) -> dict[str, str]:
    """The rendered text of every template file of the case tree `src`, by relative path:
    with `casefiles.copy_case` this writes what `render_case` writes."""
    return {
        rel: render_text(text, context, filename=rel) for rel, text in _case_templates(src).items()
    }


# by the case tree: its path, then (relative path, size, mtime) of each of its files
_TEMPLATES_CACHE: dict[tuple[str | tuple[str, int, int], ...], dict[str, str]] = {}


def _case_templates(src: Path) -> dict[str, str]:
    """The template files of a case tree, read once per version of the tree: every run of a
    study renders the same case (the key is every file's path, size and mtime)."""
    files = walk(Path(src))
    key: tuple[str | tuple[str, int, int], ...] = (
        str(src),
        *((rel, st.st_size, st.st_mtime_ns) for path, rel in files for st in [os.stat(path)]),
    )
    cached = _TEMPLATES_CACHE.get(key)
    if cached is None:
        cached = {rel: text for path, rel in files if (text := read_template(path)) is not None}
        if len(_TEMPLATES_CACHE) >= 64:
            _TEMPLATES_CACHE.clear()
        _TEMPLATES_CACHE[key] = cached
    return cached
