"""One dictionary read the way OpenFOAM reads it, refusing what would leave the case.

`DictReader` walks a file's tokens as OpenFOAM's ``dictionary::read`` does: entries,
sub-dictionaries, values up to their ``;``, directives where they stand (in a dictionary or
inside a value), ``$variables`` expanded from the dictionaries read so far
(orchestration.case.foamscope), ``#include``d files read in place. It refuses, naming the file
and line:

- an include whose path, once expanded, leaves the case (or leaves OpenFOAM's etc folder
  for ``#includeEtc``), or depends on something it cannot know (the environment, code, a
  placeholder, an ``#ifeq`` branch);
- a ``libs``-like entry (``libs``, ``functionObjectLibs``, …, whatever its quoting, a
  quoted pattern matching it, a keyword a placeholder writes) that is not a list of
  library names;
- in a dictionary file, a directive OpenFOAM would run but this reader does not know.

Plain Python, no Django (orchestration.case.casecheck).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

from orchestration.case import casepaths
from orchestration.case.casefiles import RenderError
from orchestration.case.casepaths import PathRefused
from orchestration.case.foamscope import (
    Entry,
    Scope,
    assign,
    lookup,
    remove,
    scoped_target,
)
from orchestration.case.foamtokens import BinaryData, Token, tokenize
from orchestration.case.libscheck import block_entries, libs_problem

__all__ = ["CaseCheckError", "Context", "DictReader"]

INCLUDES = {  # directive: reads the case's files (True) or OpenFOAM's etc folder (False)
    "#include": True,
    "#sinclude": True,
    "#includeIfPresent": True,
    "#includeEtc": False,
    "#sincludeEtc": False,
}
_FUNCTIONS = ("#includeFunc", "#includeModel")
_CODE = ("#calc", "#codeStream", "#eval", "#neg")
_MODES = {"#default": "default", "#overwrite": "overwrite", "#merge": "merge", "#warn": "warn"}
_MODES["#error"] = "error"
_CONDITIONS = ("#if", "#ifeq", "#elif", "#else", "#endif")
KNOWN = frozenset(
    [*INCLUDES, *_FUNCTIONS, *_CODE, *_MODES, *_CONDITIONS, "#remove", "#inputMode", "#message"]
)
_INPUT_MODES = ("merge", "overwrite", "protect", "warn", "error", "default")
MAX_INCLUDE_DEPTH = 16
_KEPT_TOKENS = 256  # longer values are kept as 'unknown' (memory)


class CaseCheckError(RenderError):
    """A case file does something a case may not; the message names the file and line and
    says what to write instead. `rel`: the file (relative to the case). A RenderError: a
    run whose rendered case fails the check cannot be prepared."""

    def __init__(self, message: str, rel: str) -> None:
        super().__init__(message)
        self.rel = rel


@dataclass
class Context:
    """What one check shares across the files it reads: how to get a file's tokens (None
    when the case has no such file), where OpenFOAM's etc folder is, the input mode and
    the #if nesting (OpenFOAM keeps both across included files)."""

    tokens_of: Callable[[str], tuple[str, list[Token], bool] | None]
    etc_keys: Callable[[str], set[str] | None]
    etc_dir: str | None
    mode: str = "merge"
    conditions: int = 0
    depth: int = 0
    reading: list[str] = field(default_factory=list)


def _unknown(reason: str, line: int) -> Token:
    return Token("unknown", reason, line)


class DictReader:
    """Reads one file's tokens into `scope`. `strict`: the file is a dictionary OpenFOAM
    reads (a FoamFile header, or included by one): an unknown directive is refused."""

    def __init__(
        self, ctx: Context, rel: str, tokens: list[Token], *, strict: bool, via: str = ""
    ) -> None:
        self.ctx, self.rel, self.tokens, self.strict, self.via = ctx, rel, tokens, strict, via
        self.pos = 0

    # -- tokens ---------------------------------------------------------------------------

    def next(self) -> Token | None:
        if self.pos >= len(self.tokens):
            return None
        self.pos += 1
        return self.tokens[self.pos - 1]

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def refuse(self, token: Token | None, message: str) -> NoReturn:
        line = f" line {token.line}" if token is not None else ""
        raise CaseCheckError(f"{self.rel}{line}{self.via}: {message}", self.rel)

    # -- dictionaries -----------------------------------------------------------------------

    def read(self, scope: Scope, *, closing: str | None = None) -> None:
        """Entries until the end (or the `closing` '}' or ')' of this dictionary)."""
        while (token := self.next()) is not None:
            if token.kind == "punct" and token.text in "})":
                if token.text == closing:
                    return
                continue  # OpenFOAM stops at a stray '}'; reading on only checks more
            if token.kind == "punct" and token.text == ";":
                continue
            self.entry(token, scope, None)

    def entry(self, token: Token, scope: Scope, mode: str | None) -> None:
        nxt = self.peek()
        opens = nxt is not None and nxt.kind == "punct" and nxt.text == "{"
        if token.kind == "directive":
            self.directive(token, scope)
        elif token.kind == "variable":
            if opens:  # `$name { … }`: a dictionary named by the variable's value
                self.pos += 1
                sub = Scope(parent=scope)
                self.read(sub, closing="}")
                scope.doubt = scope.doubt or f"{token.text} names a dictionary here"
            else:  # `$name` (`;` or not): the entries of the dictionary it names, here
                self.merge(token, scope)
        elif token.kind in ("word", "string"):
            if opens:
                self.pos += 1
                sub = Scope(parent=scope)
                self.read(sub, closing="}")
                self.store(scope, token, Entry(token.text, self.where(token), scope=sub), mode)
            else:
                tokens = self.value(scope, token, None)
                if len(tokens) > _KEPT_TOKENS:  # a field's values: never a path or a library
                    tokens = [_unknown(f"a value of {len(tokens):,} tokens", token.line)]
                entry = Entry(token.text, self.where(token), tokens=tokens)
                self.store(scope, token, entry, mode)
        elif (
            token.kind == "punct"
            and token.text == "("
            or (
                token.kind == "number"
                and nxt is not None
                and nxt.kind == "punct"
                and nxt.text == "("
            )
        ):
            # `( … )` or `N ( … )` where a keyword should be: OpenFOAM reads a list of entries
            if token.kind == "number":
                self.pos += 1
            self.read(Scope(parent=scope), closing=")")
        else:
            self.value(scope, None, token)

    def where(self, token: Token) -> str:
        return f"{self.rel} line {token.line}"

    def store(self, scope: Scope, key: Token, entry: Entry, mode: str | None) -> None:
        if key.placeholder:
            entry.doubt = "its keyword is a placeholder"
        if self.ctx.conditions:
            entry.doubt = entry.doubt or "it is set inside #if/#ifeq"
        name, pattern = key.text, key.kind == "string"
        if "/" in name:  # `"a/b/c" …`: entry c of the sub-dictionary a/b (made if need be)
            scope, name, pattern = scoped_target(scope, name)
        mode = mode or self.ctx.mode
        if mode != "merge" and name in scope.entries:
            entry.doubt = entry.doubt or f"#inputMode {mode} decides which value counts"
            scope.entries[name].doubt = scope.entries[name].doubt or entry.doubt
        assign(scope, name, entry, pattern=pattern, mode=mode)

    def merge(self, token: Token, scope: Scope) -> None:
        """`$dict;`: the entries of the dictionary it names, here."""
        if token.placeholder or token.text.startswith("${"):
            scope.doubt = scope.doubt or f"{token.text} may merge any entries here"
            return
        found = lookup(scope, token.text[1:], regex=True)
        if found.doubt:
            scope.doubt = scope.doubt or found.doubt
        elif found.entry is not None and found.entry.scope is not None:
            for key, entry in list(found.entry.scope.entries.items()):
                pattern = any(p == key for p, _ in found.entry.scope.patterns)
                assign(scope, key, entry, pattern=pattern, mode=self.ctx.mode)

    # -- values -------------------------------------------------------------------------------

    def value(self, scope: Scope, key: Token | None, first: Token | None) -> list[Token]:
        """A primitive entry's tokens up to its ';' (OpenFOAM counts ( ) and { } to find
        it), directives run and variables expanded as OpenFOAM does while reading it."""
        out: list[Token] = []
        depth = 0
        token = first
        while True:
            if token is None:
                token = self.next()
                if token is None:
                    break
            kind = token.kind
            if kind == "punct":
                if token.text == ";" and depth == 0:
                    break
                if token.text in "({":
                    depth += 1
                elif token.text in ")}":
                    depth -= 1
                out.append(token)
            elif kind == "data":
                depth += int(token.text)
                out.append(token)
            elif kind == "directive":
                self.value_directive(token, scope, out)
            elif kind == "variable":
                out.extend(self.expand(token, scope))
            elif kind == "expression":
                out.append(_unknown(f"{token.text} (an expression OpenFOAM evaluates)", token.line))
            else:
                out.append(token)
            token = None
        if key is not None:
            self.check_libs(key, out)
        self.check_blocks(out)
        return out

    def expand(self, token: Token, scope: Scope) -> list[Token]:
        """A `$variable` in a value: the tokens of the entry it names."""
        if token.placeholder:
            return [_unknown("a placeholder", token.line)]
        if token.text.startswith("${"):
            return [_unknown(f"{token.text} (OpenFOAM expands it as text)", token.line)]
        name = token.text[1:]
        found = lookup(scope, name, regex=False)
        if found.doubt:
            return [_unknown(f"{token.text}, whose value {found.doubt}", token.line)]
        if found.entry is None:
            reason = f"{token.text}, which the case does not define (OpenFOAM would read the environment)"
            return [_unknown(reason, token.line)]
        if found.entry.tokens is None:
            return [_unknown(f"{token.text}, a dictionary", token.line)]
        return list(found.entry.tokens)

    def value_directive(self, token: Token, scope: Scope, out: list[Token]) -> None:
        name = token.text
        if name in INCLUDES:
            self.include(token, scope, in_value=True)
        elif name in _CODE:
            self.code_argument(name, scope)
        elif name in _FUNCTIONS:
            self.function(token, scope)
        elif name == "#word":
            self.refuse(token, "#word builds a word OpenFOAM reads later: write the word out")
        elif name not in KNOWN and self.strict:
            self.unknown(token)
        out.append(_unknown(f"what {name} gives", token.line))

    # -- libs -----------------------------------------------------------------------------------

    def check_libs(self, key: Token, tokens: list[Token]) -> None:
        problem = libs_problem(key, tokens)
        if problem is not None:
            self.refuse(key, problem)

    def check_blocks(self, tokens: list[Token]) -> None:
        for key, value in block_entries(tokens):
            self.check_libs(key, value)

    # -- directives -------------------------------------------------------------------------

    def directive(self, token: Token, scope: Scope) -> None:
        name = token.text
        if name in INCLUDES:
            self.include(token, scope, in_value=False)
        elif name in _FUNCTIONS:
            self.function(token, scope)
        elif name in _CODE:
            self.code_argument(name, scope)
            scope.doubt = scope.doubt or f"{name} may write any entry here"
        elif name in _MODES:
            nxt = self.next()
            if nxt is not None:
                self.entry(nxt, scope, _MODES[name])
        elif name == "#inputMode":
            nxt = self.next()
            if nxt is not None and nxt.kind == "word":
                self.ctx.mode = nxt.text if nxt.text in _INPUT_MODES else "merge"
        elif name == "#remove":
            self.remove(token, scope)
        elif name in _CONDITIONS:
            self.condition(token, scope)
        elif name == "#message":
            self.next()
        elif name == "#word":
            self.refuse(token, "#word builds a keyword OpenFOAM reads later: write the keyword out")
        elif self.strict:
            self.unknown(token)

    def unknown(self, token: Token) -> NoReturn:
        self.refuse(
            token,
            f"{token.text} is not a directive this portal knows (OpenFOAM would run it or stop "
            f"on it); the known ones are {', '.join(sorted(KNOWN))}",
        )

    def condition(self, token: Token, scope: Scope) -> None:
        name = token.text
        if name in ("#if", "#elif"):
            raw = self.next()  # the rest of the line, read by OpenFOAM as a value
            if raw is not None and raw.kind == "raw":
                line = [
                    Token(t.kind, t.text, t.line + raw.line - 1, t.placeholder)
                    for t in tokenize(raw.text)
                ]
                sub = DictReader(self.ctx, self.rel, line, strict=self.strict, via=self.via)
                sub.value(scope, None, None)
        elif name == "#ifeq":
            self.next()
            self.next()
        if name in ("#if", "#ifeq"):
            self.ctx.conditions += 1
        elif name == "#endif":
            self.ctx.conditions = max(self.ctx.conditions - 1, 0)

    def remove(self, token: Token, scope: Scope) -> None:
        arg = self.next()
        names: list[Token] = []
        if arg is not None and arg.kind == "punct" and arg.text == "(":
            while (t := self.next()) is not None and not (t.kind == "punct" and t.text == ")"):
                names.append(t)
        elif arg is not None:
            names.append(arg)
        keys = [(t.text, t.kind == "string") for t in names if t.kind in ("word", "string")]
        if any(t.placeholder or t.kind not in ("word", "string") for t in names):
            scope.doubt = scope.doubt or "#remove may remove any entry here"
        doubt = "#remove inside #if/#ifeq may remove it" if self.ctx.conditions else None
        remove(scope, keys, doubt=doubt)

    def code_argument(self, name: str, scope: Scope) -> None:
        """The argument of #calc, #eval, #neg (a string, raw text, a variable) or of
        #codeStream (a dictionary: its entries are read, and checked, first)."""
        nxt = self.peek()
        if nxt is None:
            return
        if name == "#codeStream" and nxt.kind == "punct" and nxt.text == "{":
            self.pos += 1
            self.read(Scope(parent=scope), closing="}")
        elif name == "#eval" and nxt.kind == "number":
            self.pos += 1
            self.code_argument(name, scope)
        elif nxt.kind in ("string", "verbatim", "raw", "expression", "variable", "word"):
            self.pos += 1

    def function(self, token: Token, scope: Scope) -> None:
        arg = self.next()
        if arg is None or arg.kind not in ("word", "string") or arg.placeholder:
            self.refuse(token, f"{token.text} needs a function object's name")
        try:
            casepaths.check_call(arg.text)
        except PathRefused as exc:
            self.refuse(token, f"{token.text} {arg.text!r}: {exc}")
        name = arg.text.split("(", 1)[0]
        doubt = f"{token.text} {arg.text} sets it"
        assign(
            scope, name, Entry(name, self.where(token), doubt=doubt), pattern=False, mode="merge"
        )

    # -- includes ---------------------------------------------------------------------------

    def include(self, token: Token, scope: Scope, *, in_value: bool) -> None:
        name = token.text
        arg = self.next()
        if arg is None or arg.kind not in ("word", "string"):
            self.refuse(token, f'{name} needs a file name in quotes (e.g. {name} "file")')
        if arg.placeholder:
            self.refuse(token, f"{name} {arg.text!r}: an include path cannot be a placeholder")
        case_file = INCLUDES[name]
        try:
            expanded = casepaths.expand_path(arg.text, lambda var: self.variable_text(var, scope))
            if not case_file:
                etc = casepaths.etc_include(expanded, self.ctx.etc_dir)
                if not in_value:
                    self.etc_entries(etc, scope)
                return
            base = posixpath.dirname(self.rel)
            target = casepaths.case_include(expanded, base)
        except PathRefused as exc:
            if not case_file:
                self.refuse(token, f"{name} {arg.text!r}: {exc}")
            self.refuse(
                token,
                f"{name} {arg.text!r}: {exc}; a case may include its own files only (a path "
                "relative to the file, <case>/…, or $FOAM_CASE/…)",
            )
        if not in_value:
            self.read_included(token, target, scope)
        else:
            self.check_included(token, target)

    def variable_text(self, name: str, scope: Scope) -> str:
        """A variable's text in a path, as OpenFOAM's stringOps puts it there."""
        found = lookup(scope, name, regex=False)
        if found.doubt:
            raise PathRefused(f"${name} may not be what the case says: {found.doubt}")
        entry = found.entry
        if entry is None:
            return casepaths.case_variable(name)
        if entry.tokens is None:
            raise PathRefused(f"${name} is a dictionary, not a path")
        if len(entry.tokens) != 1 or entry.tokens[0].kind not in ("word", "string"):
            unknown = [t.text for t in entry.tokens if t.kind == "unknown"]
            because = f" ({unknown[0]})" if unknown else ""
            raise PathRefused(f"${name} is not one word or string{because}")
        if entry.tokens[0].placeholder:
            raise PathRefused(f"${name} is a placeholder")
        return entry.tokens[0].text

    def read_included(self, token: Token, target: str, scope: Scope) -> None:
        try:
            found = self.ctx.tokens_of(target)
        except BinaryData:
            self.refuse(token, f"{token.text} {target!r} includes binary data")
        if found is None:
            return  # no such file: OpenFOAM stops (#include) or goes on (#sinclude)
        rel, tokens, template = found
        if self.ctx.depth >= MAX_INCLUDE_DEPTH or rel in self.ctx.reading:
            self.refuse(token, f"{token.text} {target!r} includes itself (or nests too deeply)")
        via = f" (included from {self.rel} line {token.line}{self.via})"
        self.ctx.depth += 1
        self.ctx.reading.append(rel)
        try:
            DictReader(self.ctx, rel, tokens, strict=True, via=via).read(scope)
        finally:
            self.ctx.depth -= 1
            self.ctx.reading.pop()
        if template:
            scope.doubt = scope.doubt or f"{rel} (a template) may set any entry here"

    def check_included(self, token: Token, target: str) -> None:
        """An include inside a value: its tokens become part of the value; the file itself
        is checked on its own (every file of a case is)."""
        try:
            self.ctx.tokens_of(target)
        except BinaryData:
            self.refuse(token, f"{token.text} {target!r} includes binary data")

    def etc_entries(self, name: str, scope: Scope) -> None:
        keys = self.ctx.etc_keys(name)
        if keys is None:
            scope.doubt = scope.doubt or f"OpenFOAM's {name} may set any entry here"
            return
        for key in keys:
            doubt = f"OpenFOAM's etc file {name} sets it"
            assign(scope, key, Entry(key, name, doubt=doubt), pattern=False, mode="merge")
