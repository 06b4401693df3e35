"""Parameter expressions and derived values: ``aoa * 2``, ``speed * cos(aoa)``, evaluated in
the template sandbox (orchestration.case.template_env) with Jinja's expression grammar (not
Python's: ``**`` is left-associative, ``~`` concatenates strings). Derived values are
ordered by what they use and remembered across a study's runs.

Stdlib + jinja2 only: this module ships with the agent onto cluster nodes.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jinja2
import jinja2.runtime
from jinja2 import nodes
from jinja2.exceptions import SecurityError

from orchestration.case.casefiles import (
    RenderError,
)
from orchestration.case.template_env import (
    BUDGET,
    ENV,
    FUNCTIONS,
    MAX_BUILT,
    check_sequence_mul,
    known_names,
    safe_pow,
)

MAX_EXPRESSION_LENGTH = 500
MAX_DERIVED = 200  # derived values of one study
_MEMO_MAX = 20_000  # derived values evaluate_derived remembers across a study's runs
_MAX_NESTING = 50  # brackets inside brackets of one expression


def _parse_expression(expr: str) -> nodes.Expr:
    if not isinstance(expr, str) or not expr.strip():
        raise RenderError(f"empty expression {expr!r}")
    if len(expr) > MAX_EXPRESSION_LENGTH:
        raise RenderError(
            f"expression is {len(expr)} characters long; the limit is {MAX_EXPRESSION_LENGTH}"
        )
    _check_nesting(expr, f"expression {expr!r}")
    try:
        parser = jinja2.parser.Parser(ENV, expr, state="variable")
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
        self._template = ENV.compile_expression(expr, undefined_to_none=False)._template
        self._globals = dict(self._template.globals)

    def __call__(self, names: Mapping[str, Any]) -> Any:
        template = self._template
        context = jinja2.runtime.new_context(
            ENV, template.name, template.blocks, {**self._globals, **names}, shared=True
        )
        for _ in template.root_render_func(context):
            pass
        return context.vars["result"]


def _mul(left: Any, right: Any) -> Any:
    check_sequence_mul(left, right)  # as the sandbox's `*`
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
    nodes.Pow: lambda left, right: safe_pow(left, right),
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
            f"unknown name {unknown[0]!r} in expression {expr!r}; known names: {known_names(names)}"
        )
    return _run_compiled(expr, _compiled(expr), names)


def _run_compiled(expr: str, compiled: _Compiled, names: Mapping[str, Any]) -> Any:
    """`compiled` (the expression `expr`) called with `names`, its failures as RenderErrors."""
    BUDGET.left = MAX_BUILT
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
