"""Sandboxed case rendering: a case's templates filled with a run's parameters.

Shared by the portal (template validation, derived values) and the run agent (rendering a
case before it runs). Only ``{{ … }}`` is template syntax: Jinja's block and comment
delimiters are set to strings that never occur in text files, so OpenFOAM's own ``{``,
``}``, ``#include``, ``#{ … #}`` and ``{#`` pass through untouched. A literal ``{{`` is
written ``{{ '{{' }}``.

Parameter expressions and derived values live in orchestration.case.expressions, the
sandbox both run in in orchestration.case.template_env; this module re-exports what callers
use of them.

Stdlib + jinja2 only: this module ships with the agent onto cluster nodes.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
from jinja2 import nodes
from jinja2.exceptions import SecurityError

from orchestration.case.casefiles import (
    MAX_TEMPLATE_BYTES,
    RenderError,
    copy_case,
    is_binary_file,
    read_template,
    walk,
)
from orchestration.case.expressions import (
    MAX_EXPRESSION_LENGTH,
    DerivedError,
    evaluate,
    evaluate_derived,
    expression_names,
)
from orchestration.case.template_env import BUDGET, ENV, ENV_CRLF, FUNCTIONS, MAX_BUILT, known_names

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


# text ending in '#' and a partial directive name, right before a placeholder
_DIRECTIVE_START = re.compile(r"#[A-Za-z_]*\Z")


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


def _where(filename: str, lineno: int | None) -> str:
    label = filename or "<template>"
    return f"{label} line {lineno}" if lineno else label


def _parse_template(text: str, filename: str) -> nodes.Template:
    """Parse and compile-check `text` (unknown filters are found at compile time)."""
    try:
        tree = ENV.parse(text)
        _only_placeholders(tree, filename)
        ENV.compile(tree)
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
    env = ENV_CRLF if crlf else ENV
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
                f"{_where(filename, lineno)}: unknown name {name!r}; known names: {known_names(context)}"
            )
    BUDGET.left = MAX_BUILT
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
