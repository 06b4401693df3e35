"""A case read once for every run that renders it: its templates split into their text and
their placeholders, and what the case checks (orchestration.case.casecheck) concluded for
each *shape* of a run's values, so that a run's case costs O(its values), not O(its files).

The shape of a run's values is each placeholder's rendered text, except a plain number
(`NUMBER`, at most `NUMBER_MAX` characters), which counts only as a number starting with a
digit or as one starting with a sign or a point. Two runs of one shape render the same
texts but for the characters of some numbers. When, in the texts of the run whose full
check decided the shape, each of those numbers stands alone —

- the lexer (orchestration.case.foamtokens) reads exactly it as one number token: it
  starts a token and the next character ends it (not in a word, a string, a comment, a
  directive, a ``$variable``, a ``#if`` line, not after a ``-`` or a ``.``);
- no run of list characters around it could make one bulk token (foamtokens' BULK_MIN),
  whatever the length of its numbers up to NUMBER_MAX;
- the file is not in OpenFOAM's binary format (a count's digits decide the bytes skipped);
- it is not between two quotes of its line (the text search for a quoted libs pattern);

— then every file of both runs is read as the same tokens but for the text of those number
tokens (the lexer looks at a number's first character only: ``#eval 3 {…}`` reads a count,
``#eval -3 {…}`` does not), the texts searched before reading find the same, and the checks
(orchestration.case.dictcheck, libscheck) look at a number token's kind, never its digits,
but to quote it in a refusal. So one full check stands for its shape: a shape whose first
run passed passes every later run of it on sight. A refused run's shape is not kept (each
of its runs is checked in full, refused with its own message), nor is a shape whose numbers
do not all stand alone, nor a case whose templates the split does not reproduce byte for
byte: those runs get the full check as before.

A plan is kept per case directory and etc folder while its directories and files are as they
were (case_plan); the caller asks for it once per batch of runs. OpenFOAM's etc folder is taken as fixed, as
casecheck's cache of passed texts takes it.

Plain Python, no Django.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import jinja2
from jinja2 import meta, nodes

from orchestration.case import casecheck, casefiles, render
from orchestration.case.foamtokens import BULK_CHARS, BULK_MIN, BinaryData, number_starts
from orchestration.case.template_env import (
    BUDGET,
    ENV,
    ENV_CRLF,
    FUNCTIONS,
    MAX_BUILT,
    placeholder_text,
)

__all__ = ["NUMBER", "NUMBER_MAX", "CasePlan", "case_plan", "value_shape"]

NUMBER = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
NUMBER_MAX = 32
DIGIT_FIRST, SIGN_FIRST = 0, 1  # a number's place in a shape
_PLANS_MAX = 64
TRUSTED_AFTER = 1.0  # seconds since a case's last change before its plan is kept
_SHAPES_MAX = 4096
# what evaluating a placeholder may raise: that run gets the full check, which says why
_EVALUATION_ERRORS = (
    casefiles.RenderError,
    jinja2.TemplateError,
    ArithmeticError,
    LookupError,
    TypeError,
    ValueError,
    RecursionError,
    MemoryError,
)


def value_shape(text: str) -> str | int:
    """A placeholder's rendered text as a shape counts it: a plain number as DIGIT_FIRST
    or SIGN_FIRST (``-`` or ``.`` first), any other text as itself."""
    if len(text) <= NUMBER_MAX and NUMBER.fullmatch(text):
        return DIGIT_FIRST if text[0] in "0123456789" else SIGN_FIRST
    return text


class _Slot:
    """One placeholder: a bare name is looked up, anything else evaluated on its own."""

    __slots__ = ("name", "template")

    def __init__(self, name: str | None, template: jinja2.Template) -> None:
        self.name, self.template = name, template

    def text(self, context: Mapping[str, Any]) -> str:
        if self.name is not None and self.name in context:
            return placeholder_text(context[self.name])
        return self.template.render(context)


class _File:
    """A template file: its literal parts around its placeholders (one more part than
    slots, newlines as Jinja writes them) and every name it loads."""

    __slots__ = ("names", "parts", "rel", "slots", "text")

    def __init__(self, rel: str, text: str, parts: list[str], slots: list[_Slot]) -> None:
        self.rel, self.text, self.parts, self.slots = rel, text, tuple(parts), tuple(slots)
        self.names: frozenset[str] = frozenset()


def _split(rel: str, text: str) -> _File | None:
    """The template split into parts and slots, None when it is not only placeholders."""
    env = ENV_CRLF if "\r\n" in text else ENV
    try:
        tree = env.parse(text)
        parts, slots = [""], []
        for node in tree.body:
            if not isinstance(node, nodes.Output):
                return None
            for child in node.nodes:
                if isinstance(child, nodes.TemplateData):
                    parts[-1] += child.data
                    continue
                alone = nodes.Template([nodes.Output([child], lineno=1)], lineno=1)
                alone.set_environment(env)
                name = child.name if isinstance(child, nodes.Name) and child.ctx == "load" else None
                slots.append(_Slot(name, env.from_string(alone)))
                parts.append("")
    except _EVALUATION_ERRORS + (SyntaxError,):
        return None
    split = _File(rel, text, parts, slots)
    split.names = frozenset(n.name for n in tree.find_all(nodes.Name) if n.ctx == "load")
    return split


def _join(parts: tuple[str, ...], values: list[str]) -> str:
    out = [parts[0]]
    for value, part in zip(values, parts[1:], strict=True):
        out += (value, part)
    return "".join(out)


class CasePlan:
    """The case at `root` as it was when `stamp` was taken: its templates and the
    conclusions of the checks by the shape of a run's values (module docstring)."""

    def __init__(
        self,
        root: str,
        etc_dir: str | None,
        stamp: tuple[tuple[str, tuple[int, int] | None], ...],
        files: list[tuple[str, str]],
    ) -> None:
        self.root, self.etc_dir, self.stamp = root, etc_dir, stamp
        self.templates = {
            rel: text for path, rel in files if (text := casefiles.read_template(path)) is not None
        }
        split = [_split(rel, text) for rel, text in self.templates.items()]
        self.files: list[_File] | None = None
        if all(f is not None for f in split):
            self.files = [f for f in split if f is not None]
        self.names = frozenset(name for f in self.files or () for name in f.names)
        self.shapes: dict[tuple[str | int, ...], bool] = {}  # True: passed, stands for all

    def names_in(self, wanted: Callable[[str], bool]) -> frozenset[str]:
        """The names loaded by the templates whose relative path `wanted` accepts (the
        placeholders a case's mesh files use: a warm start's same-mesh test)."""
        out: set[str] = set()
        for rel, text in self.templates.items():
            if not wanted(rel):
                continue
            env = ENV_CRLF if "\r\n" in text else ENV
            try:
                out |= meta.find_undeclared_variables(env.parse(text))
            except jinja2.TemplateSyntaxError:
                continue
        return frozenset(out)

    def checked(self, context: Mapping[str, Any], *, texts: bool = True) -> dict[str, str] | None:
        """The texts the case's templates render to with `context`, checked as
        casecheck.render_checked checks them (raising as it does); None instead of the
        texts when not `texts` and the checks passed this run's shape before."""
        values = self._values(context)
        shape = None if values is None else tuple(value_shape(v) for vs in values for v in vs)
        if shape is not None and self.shapes.get(shape):
            if not texts:
                return None
            assert self.files is not None and values is not None
            return {f.rel: _join(f.parts, vs) for f, vs in zip(self.files, values, strict=True)}
        rendered = {
            rel: render.render_text(text, context, filename=rel)
            for rel, text in self.templates.items()
        }
        casecheck.check_rendered(self.root, rendered, etc_dir=self.etc_dir)
        if shape is not None and values is not None and shape not in self.shapes:
            if len(self.shapes) >= _SHAPES_MAX:
                self.shapes.clear()
            self.shapes[shape] = self._stands_for_shape(rendered, values)
        return rendered

    def _values(self, context: Mapping[str, Any]) -> list[list[str]] | None:
        """Each file's placeholders' texts (None: this run gets the full check), each file
        with a fresh budget as render_text gives it."""
        if self.files is None or any(n not in context and n not in FUNCTIONS for n in self.names):
            return None
        values: list[list[str]] = []
        try:
            for f in self.files:
                BUDGET.left = MAX_BUILT
                values.append([slot.text(context) for slot in f.slots])
        except _EVALUATION_ERRORS:
            return None
        return values

    def _stands_for_shape(self, rendered: Mapping[str, str], values: list[list[str]]) -> bool:
        """Whether these texts, which passed, stand for every run of their shape: the split
        gives them back, and each number of the shape stands alone."""
        assert self.files is not None
        for f, vs in zip(self.files, values, strict=True):
            text = rendered[f.rel]
            if _join(f.parts, vs) != text:
                return False
            spans, at = [], len(f.parts[0])
            for value, part in zip(vs, f.parts[1:], strict=True):
                if not isinstance(value_shape(value), str):
                    spans.append((at, len(value)))
                at += len(value) + len(part)
            if spans and not numbers_stand_alone(text, spans):
                return False
        return True


def numbers_stand_alone(text: str, spans: list[tuple[int, int]]) -> bool:
    """Whether each plain number of `text` at (offset, length) in `spans` stands alone
    (module docstring): any other plain numbers there give the same tokens but for these."""
    try:
        starts, binary = number_starts(text, bulk=True, limit=casecheck.MAX_TOKENS)
    except BinaryData:
        return False
    if binary:
        return False
    for start, length in spans:
        token = starts.get(start)
        if token is None or token.kind != "number" or len(token.text) != length:
            return False
        end = start + length
        line_end = text.find("\n", end)
        before = text[text.rfind("\n", 0, start) + 1 : start]
        if '"' in before and '"' in text[end : len(text) if line_end < 0 else line_end]:
            return False
        first, last = start, end  # the run of list characters around it, up to BULK_MIN
        while first > 0 and text[first - 1] in BULK_CHARS and last - first < BULK_MIN:
            first -= 1
        while last < len(text) and text[last] in BULK_CHARS and last - first < BULK_MIN:
            last += 1
        inside = [n for s, n in spans if first <= s and s + n <= last]
        if (last - first) - sum(inside) + NUMBER_MAX * len(inside) >= BULK_MIN:
            return False
    return True


_PLANS: dict[tuple[str, str | None], CasePlan] = {}
Stamp = tuple[tuple[str, tuple[int, int] | None], ...]


def case_plan(root: str | os.PathLike[str], *, etc_dir: str | None) -> CasePlan:
    """The plan of the case at `root` as it is now: the one kept while the case is as it
    was, else a new one (RenderError for a symbolic link or a special file in the case).

    As it was: every directory of the case has its modification time (a file or directory
    added, removed or renamed in it changes that) and every file its size and modification
    time (as casecheck and render key their caches): a stat each, no listing. Timestamps
    are coarse (a change within the same few milliseconds may keep one), so a plan is kept
    only when its case changed more than TRUSTED_AFTER seconds before it was read, and
    not while it was read."""
    root = os.fspath(root)
    key = (root, etc_dir)
    plan = _PLANS.get(key)
    if plan is not None and _stamp(plan.stamp) == plan.stamp:
        return plan
    settled = time.time_ns() - int(TRUSTED_AFTER * 1e9)
    files, dirs = _tree(root)
    stamp = _stamp(tuple((path, None) for path in (*dirs, *(path for path, _ in files))))
    plan = CasePlan(root, etc_dir, stamp, files)
    if all(st is None or st[0] < settled for _, st in stamp) and _tree(root) == (files, dirs):
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


def _tree(root: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The case's files (casefiles.walk) and its directories, the case's own first."""
    files = casefiles.walk(root)
    return files, [root, *sorted(path for path, _, _ in os.walk(root) if path != root)]


def _stamp(paths: Stamp) -> Stamp:
    """Each path with its modification time and size now (None: gone)."""
    out: list[tuple[str, tuple[int, int] | None]] = []
    for path, _ in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append((path, None))
            continue
        out.append((path, (st.st_mtime_ns, st.st_size)))
    return tuple(out)
