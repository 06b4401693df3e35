"""A tolerant reader of OpenFOAM dictionaries, for inspecting a case (never for running it).

Reads what a case's dictionaries say (``application simpleFoam;``, the ``functions`` of a
controlDict, the ``solvers`` of an fvSolution) from OpenFOAM's own tokens
(orchestration.case.foamtokens: comments, quoted strings, words with balanced parentheses such
as ``div(phi,U)`` and ``patchAverage(name=outlet,p)``, ``$macro`` values) into nested
dictionaries and lists, with the directives ``#include``/``#includeIfPresent``/``#sinclude``
and ``#includeEtc``/``#sincludeEtc`` followed where the case checks allow them
(orchestration.case.casepaths: the case's own files, OpenFOAM's etc folder when it is
installed), ``#includeFunc`` (a function object from etc/caseDicts/postProcessing with its
arguments) and ``#remove``; code (``#codeStream``, ``#calc``, ``#eval``, ``#{ … #}``) is
skipped, never run. A case's ``{{ … }}`` placeholders are read as part of their word.

Plain Python, no Django: used by orchestration.case.caseinspect in the portal.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass, field
from typing import Any

from orchestration.case import casepaths
from orchestration.case.foamtokens import BinaryData, tokenize

__all__ = ["DictError", "FoamDict", "parse_call", "parse_file", "parse_text"]

_MAX_BYTES = 8 * 1024 * 1024
_MAX_DEPTH = 16  # nested includes
_MAX_NESTING = 64  # dictionaries in dictionaries


class DictError(ValueError):
    """A dictionary could not be read; the message names the file and line."""


@dataclass
class FoamDict:
    """A dictionary: its entries in order; a value is a FoamDict, or a list of tokens (words,
    numbers as text, strings with their quotes dropped, and nested lists)."""

    entries: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.entries.get(key, default)

    def word(self, key: str) -> str | None:
        """The single word an entry holds (``application simpleFoam;`` → simpleFoam)."""
        value = self.entries.get(key)
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
            return value[0]
        return None

    def words(self, key: str) -> list[str]:
        """The words of an entry that is a list, or one word (``fields (p U);`` → [p, U])."""
        value = self.entries.get(key)
        if not isinstance(value, list):
            return []
        out: list[str] = []
        for item in value:
            if isinstance(item, list):
                out.extend(x for x in item if isinstance(x, str))
            elif isinstance(item, str):
                out.append(item)
        return out

    def dicts(self) -> dict[str, FoamDict]:
        return {k: v for k, v in self.entries.items() if isinstance(v, FoamDict)}


# -- tokens ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Token:
    kind: str  # word | string | punct | directive | raw | code
    text: str
    line: int


_KINDS = {
    "word": "word",
    "number": "word",
    "variable": "word",
    "string": "string",
    "directive": "directive",
    "raw": "raw",
    "verbatim": "code",
    "expression": "code",
}


def _tokens(text: str, where: str) -> list[_Token]:
    """OpenFOAM's tokens (orchestration.case.foamtokens), as this reader uses them."""
    try:
        tokens = tokenize(text, templates=True)
    except BinaryData as exc:
        raise DictError(f"{where} {exc}: binary data, not a dictionary") from exc
    out: list[_Token] = []
    for token in tokens:
        if token.kind == "punct":
            kind = "punct" if token.text in "{}()[];" else "word"
            out.append(_Token(kind, token.text, token.line))
        elif token.kind in _KINDS:
            out.append(_Token(_KINDS[token.kind], token.text, token.line))
    return out


# -- parsing -----------------------------------------------------------------------------


@dataclass
class _Context:
    case_root: str | None
    etc_dir: str | None
    depth: int = 0
    notes: list[str] = field(default_factory=list)


class _Parser:
    def __init__(self, tokens: list[_Token], where: str, base: str | None, ctx: _Context):
        self.tokens, self.pos, self.where, self.base, self.ctx = tokens, 0, where, base, ctx
        self.nesting = 0

    def _error(self, message: str, token: _Token | None = None) -> DictError:
        token = token or (self.tokens[self.pos] if self.pos < len(self.tokens) else None)
        line = f" line {token.line}" if token else " at its end"
        return DictError(f"{self.where}{line}: {message}")

    def _next(self) -> _Token | None:
        if self.pos >= len(self.tokens):
            return None
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def _peek(self) -> _Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def parse_dict(self, out: FoamDict, scopes: list[FoamDict], closing: _Token | None) -> FoamDict:
        self.nesting += 1
        if self.nesting > _MAX_NESTING:
            raise self._error(f"dictionaries nested more than {_MAX_NESTING} deep", closing)
        try:
            return self._entries(out, scopes, closing)
        finally:
            self.nesting -= 1

    def _entries(self, out: FoamDict, scopes: list[FoamDict], closing: _Token | None) -> FoamDict:
        while True:
            token = self._next()
            if token is None:
                if closing is not None:
                    raise self._error("this { is never closed with }", closing)
                return out
            if token.kind == "punct" and token.text == "}":
                if closing is None:
                    raise self._error("a } closes nothing", token)
                return out
            if token.kind == "punct" and token.text == ";":
                continue
            if token.kind in ("code", "raw"):
                continue
            if token.kind == "directive":
                self._directive(token, out, scopes)
                continue
            if token.kind == "punct":
                raise self._error(f"expected a keyword, found {token.text!r}", token)
            key = token.text
            nxt = self._peek()
            if nxt is not None and nxt.kind == "punct" and nxt.text == "{":
                self.pos += 1
                sub = FoamDict()
                self.parse_dict(sub, [*scopes, out], closing=nxt)
                out.entries[key] = sub
                continue
            if key.startswith("$") and nxt is not None and nxt.text == ";":
                found = self._lookup(key[1:], [*scopes, out])  # `$dict;` merges that dict
                if isinstance(found, FoamDict):
                    out.entries.update(found.entries)
                continue
            out.entries[key] = self._value([*scopes, out])

    def _value(self, scopes: list[FoamDict]) -> list[Any]:
        items: list[Any] = []
        stack: list[list[Any]] = [items]
        while True:
            token = self._next()
            if token is None:
                raise self._error("an entry is never ended with ;")
            if token.kind == "punct":
                if token.text == ";" and len(stack) == 1:
                    return items
                if token.text == "(":
                    new: list[Any] = []
                    stack[-1].append(new)
                    stack.append(new)
                elif token.text == ")":
                    if len(stack) == 1:
                        raise self._error("a ) closes nothing", token)
                    stack.pop()
                elif token.text == "{":  # a dictionary inside a list: read and kept
                    sub = FoamDict()
                    self.parse_dict(sub, scopes, closing=token)
                    stack[-1].append(sub)
                elif token.text == "}":
                    raise self._error("an entry is never ended with ; before }", token)
                continue
            if token.kind == "directive":
                if token.text in ("#calc", "#codeStream", "#eval"):
                    self._skip_code_value()
                    stack[-1].append("<code>")
                continue
            if token.kind in ("code", "raw"):
                stack[-1].append("<code>")
                continue
            if token.kind == "word" and token.text.startswith("$") and len(token.text) > 1:
                found = self._lookup(token.text[1:].strip("{}"), scopes)
                if isinstance(found, list):
                    stack[-1].extend(found)
                    continue
            stack[-1].append(token.text)

    def _skip_code_value(self) -> None:
        token = self._peek()
        if token is not None and token.kind in ("string", "code", "raw"):
            self.pos += 1
        elif token is not None and token.text == "{":
            self.pos += 1
            self.parse_dict(FoamDict(), [], closing=token)

    def _lookup(self, name: str, scopes: list[FoamDict]) -> Any:
        if name.startswith(":"):
            name, scopes = name[1:], scopes[:1]
        parts = name.split(".") if "." in name and not name.startswith(".") else [name]
        for scope in reversed(scopes):
            value: Any = scope
            for part in parts:
                value = value.get(part) if isinstance(value, FoamDict) else None
            if value is not None:
                return value
        return None

    def _directive(self, token: _Token, out: FoamDict, scopes: list[FoamDict]) -> None:
        name = token.text
        if name in ("#include", "#includeIfPresent", "#sinclude", "#includeEtc", "#sincludeEtc"):
            arg = self._next()
            if arg is None or arg.kind not in ("string", "word"):
                raise self._error(f"{name} needs a file name", token)
            path = self._include_path(name, arg.text, [*scopes, out])
            if path is None or not os.path.isfile(path):
                if name in ("#include", "#includeEtc"):
                    self.ctx.notes.append(
                        f"{self.where} line {token.line}: {name} {arg.text} not found"
                    )
                return
            self._merge_file(path, out, scopes)
        elif name == "#includeFunc":
            arg = self._next()
            if arg is None or arg.kind not in ("string", "word"):
                raise self._error("#includeFunc needs a function name", token)
            self._include_func(arg.text, out, token)
        elif name in ("#remove",):
            arg = self._next()
            if arg is not None and arg.kind in ("word", "string"):
                out.entries.pop(arg.text, None)
            elif arg is not None and arg.text == "(":
                while (t := self._next()) is not None and t.text != ")":
                    out.entries.pop(t.text, None)
        elif name in ("#calc", "#codeStream", "#eval"):
            self._skip_code_value()
        elif name in ("#if", "#elif", "#message"):
            self._next()  # the condition's line, the message
        elif name == "#ifeq":
            self._next()
            self._next()
        # #inputMode, #default, #overwrite, #warn, #else, #endif …: nothing to read

    def _include_path(self, directive: str, target: str, scopes: list[FoamDict]) -> str | None:
        """The file an include reads, by the rules of the case checks
        (orchestration.case.casepaths); None for one outside the case or OpenFOAM's etc folder."""

        def variable(name: str) -> str:
            found = self._lookup(name, scopes)
            if found is None:
                return casepaths.case_variable(name)
            if isinstance(found, list) and len(found) == 1 and isinstance(found[0], str):
                return found[0]
            raise casepaths.PathRefused(f"${name} is not one word")

        root = self.ctx.case_root
        try:
            expanded = casepaths.expand_path(target, variable)
            if directive in ("#includeEtc", "#sincludeEtc"):
                if self.ctx.etc_dir is None:
                    return None
                path = os.path.join(
                    self.ctx.etc_dir, casepaths.etc_include(expanded, self.ctx.etc_dir)
                )
                return path if os.path.isfile(path) else path + ".gz"
            if root is None or self.base is None:
                return None
            base = os.path.relpath(self.base, root)
            rel = casepaths.case_include(expanded, "" if base == "." else base)
        except casepaths.PathRefused:
            return None
        path = os.path.join(root, rel)
        if not os.path.isfile(path) and os.path.isfile(path + ".gz"):
            path += ".gz"
        real, real_root = os.path.realpath(path), os.path.realpath(root)
        return real if real.startswith(real_root + os.sep) else None

    def _merge_file(self, path: str, out: FoamDict, scopes: list[FoamDict]) -> None:
        if self.ctx.depth >= _MAX_DEPTH:
            raise self._error("#include is nested too deeply (a file includes itself?)")
        text = _read(path)
        where = self._display(path)
        self.ctx.depth += 1
        try:
            sub = _Parser(_tokens(text, where), where, os.path.dirname(path), self.ctx)
            sub.parse_dict(out, scopes, closing=None)
        finally:
            self.ctx.depth -= 1

    def _display(self, path: str) -> str:
        root = self.ctx.case_root
        if root and path.startswith(os.path.realpath(root) + os.sep):
            return os.path.relpath(path, os.path.realpath(root))
        return f"<etc>/{os.path.basename(path)}"

    def _include_func(self, call: str, out: FoamDict, token: _Token) -> None:
        name, args, named = parse_call(call)
        path = _find_func(self.ctx.etc_dir, name)
        entry = FoamDict()
        if path is None:
            self.ctx.notes.append(
                f"{self.where} line {token.line}: #includeFunc {name}: no such function in "
                "OpenFOAM's etc/caseDicts/postProcessing here"
            )
            entry.entries["type"] = [name]
        else:
            self._merge_file(path, entry, [])
        for key, value in named.items():
            entry.entries[key] = [value] if " " not in value else value.split()
        if args:
            entry.entries["fields"] = [list(args)]
            if len(args) == 1:
                entry.entries["field"] = [args[0]]
        out.entries[call] = entry


def parse_call(call: str) -> tuple[str, list[str], dict[str, str]]:
    """``patchAverage(name=outlet,p)`` → (patchAverage, [p], {name: outlet})."""
    if "(" not in call or not call.endswith(")"):
        return call, [], {}
    name, inner = call[: call.index("(")], call[call.index("(") + 1 : -1]
    args: list[str] = []
    named: dict[str, str] = {}
    depth, current = 0, ""
    for ch in inner + ",":
        if ch == "," and depth == 0:
            part = current.strip()
            if "=" in part:
                key, value = part.split("=", 1)
                named[key.strip()] = value.strip().strip("()")
            elif part:
                args.append(part)
            current = ""
            continue
        depth += (ch == "(") - (ch == ")")
        current += ch
    return name, args, named


def _find_func(etc_dir: str | None, name: str) -> str | None:
    if etc_dir is None or "/" in name or name.startswith("."):
        return None
    base = os.path.join(etc_dir, "caseDicts", "postProcessing")
    for dirpath, _, filenames in sorted(os.walk(base)):
        if name in filenames:
            return os.path.join(dirpath, name)
    return None


def _read(path: str) -> str:
    with open(path, "rb") as fh:
        data = fh.read(_MAX_BYTES + 1)
    if len(data) > _MAX_BYTES:
        raise DictError(f"{os.path.basename(path)} is larger than {_MAX_BYTES // 2**20} MB")
    if data.startswith(b"\x1f\x8b"):
        data = gzip.decompress(data)[: _MAX_BYTES + 1]
    if b"\x00" in data[:8192]:
        raise DictError(f"{os.path.basename(path)} is binary, not a dictionary")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def parse_text(
    text: str,
    *,
    where: str = "<text>",
    base: str | None = None,
    case_root: str | None = None,
    etc_dir: str | None = None,
    notes: list[str] | None = None,
) -> FoamDict:
    """The dictionary `text` holds (its FoamFile header included as an entry)."""
    ctx = _Context(case_root=case_root, etc_dir=etc_dir)
    out = FoamDict()
    _Parser(_tokens(text, where), where, base, ctx).parse_dict(out, [], closing=None)
    if notes is not None:
        notes.extend(ctx.notes)
    return out


def parse_file(
    path: str, *, case_root: str, etc_dir: str | None = None, notes: list[str] | None = None
) -> FoamDict:
    """The dictionary in the case file `path`; includes resolved inside `case_root`."""
    where = os.path.relpath(path, case_root)
    return parse_text(
        _read(path),
        where=where,
        base=os.path.dirname(path),
        case_root=case_root,
        etc_dir=etc_dir,
        notes=notes,
    )
