"""Dictionaries as OpenFOAM builds them while it reads, for resolving ``$variables``.

A `Scope` is one dictionary: its entries in order, its quoted (pattern) keys, its parent.
`lookup` finds a variable the way OpenFOAM's ``dictionary::csearchScoped`` does: ``$a``
in this dictionary then its parents, ``$a.b`` into sub-dictionaries (``$..a`` one level
up), ``$:a.b`` and ``$^a`` from the top, ``$/a/b`` and ``$../a`` by slashes. Where the
answer may not be what the files say (an entry set by ``#codeStream``, inside ``#ifeq``,
by a template's placeholder, or where OpenFOAM versions scope differently) the result
carries a doubt: callers refuse what depends on it.

Plain Python, no Django (orchestration.case.casecheck).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from orchestration.case.foamtokens import Token

__all__ = [
    "Entry",
    "Found",
    "Scope",
    "assign",
    "lookup",
    "pattern_matches",
    "remove",
    "scoped_target",
]

# what a quoted key must hold to be a regular expression (OpenFOAM's regExp::is_meta)
_META = re.compile(r"[.|*+?()\[\]{}^$\\]")
# constructs whose meaning differs between POSIX (OpenFOAM v1912), C++ and Python regexes
_UNSURE = re.compile(r"\[[:=.]|\\[A-Za-z0-9]|\(\?(?!i\))")


@dataclass
class Entry:
    """A dictionary entry: `tokens` (a primitive value, its variables expanded) or `scope`
    (a sub-dictionary); `doubt` says why its value may differ from what the case says."""

    key: str
    where: str
    tokens: list[Token] | None = None
    scope: Scope | None = None
    doubt: str | None = None


@dataclass
class Scope:
    parent: Scope | None = None
    entries: dict[str, Entry] = field(default_factory=dict)
    patterns: list[tuple[str, Entry]] = field(default_factory=list)  # latest first
    doubt: str | None = None  # code or a template may have set or removed entries here


@dataclass(frozen=True)
class Found:
    entry: Entry | None
    doubt: str | None = None


def pattern_matches(pattern: str, name: str) -> bool | None:
    """Whether a quoted key `pattern` matches `name` as OpenFOAM matches it (a plain string
    when it has no regular-expression character); None when this cannot be told for every
    OpenFOAM version (POSIX classes, escapes, look-arounds, a pattern Python refuses)."""
    if not _META.search(pattern):
        return pattern == name
    if _UNSURE.search(pattern):
        return None
    try:
        return re.fullmatch(pattern, name) is not None
    except re.error:
        return None


def _top(scope: Scope) -> Scope:
    while scope.parent is not None:
        scope = scope.parent
    return scope


class _Search:
    """One lookup; remembers the doubts of the dictionaries it looked in."""

    def __init__(self, regex: bool, dot_recursive: bool) -> None:
        self.regex, self.dot_recursive = regex, dot_recursive
        self.doubt: str | None = None

    def here(self, scope: Scope, key: str, recursive: bool) -> Entry | None:
        while True:
            if scope.doubt and not self.doubt:
                self.doubt = scope.doubt
            found = scope.entries.get(key)
            if found is not None:
                return found
            if self.regex:
                for pattern, entry in scope.patterns:
                    matched = pattern_matches(pattern, key)
                    if matched is None and not self.doubt:
                        self.doubt = f'the quoted key "{pattern}" may or may not match {key!r}'
                    if matched:
                        return entry
            if not recursive or scope.parent is None:
                return None
            scope = scope.parent

    def dotted(self, scope: Scope, key: str, recursive: bool) -> Entry | None:
        """OpenFOAM's csearchDotScoped; `dot_recursive` is the older reading (the first word
        found in parents too, a primitive first word read as part of a dotted keyword)."""
        pos = key.find(".")
        if pos < 0:
            return self.here(scope, key, recursive)
        recursive = recursive and self.dot_recursive
        if pos == 0:  # '.x': here; '..x': the parent; one more level per further '.'
            rest = key[1:]
            while rest.startswith("."):
                if scope.parent is None:
                    return None
                scope, rest = scope.parent, rest[1:]
            return self.dotted(scope, rest, False)
        found = self.here(scope, key[:pos], recursive)
        if found is None or (self.dot_recursive and found.scope is None):
            while True:  # a keyword with dots in it: a.b, then a.b.c, …
                pos = key.find(".", pos + 1)
                found = self.here(scope, key if pos < 0 else key[:pos], recursive)
                if pos < 0:
                    return found
                if found is not None and found.scope is not None:
                    break
        if found.scope is not None:
            return self.dotted(found.scope, "." + key[pos + 1 :], False)
        return found

    def slashed(self, scope: Scope, key: str) -> Entry | None:
        if key.startswith("/"):
            scope = _top(scope)
        parts = [p for p in key.split("/") if p]
        for i, part in enumerate(parts):
            if part == ".":
                continue
            if part == "..":
                if scope.parent is None:
                    return None
                scope = scope.parent
                continue
            found = self.here(scope, part, False)
            if found is None:
                return None
            if i == len(parts) - 1:
                return found
            if found.scope is None:
                return None
            scope = found.scope
        return None

    def scoped(self, scope: Scope, key: str) -> Entry | None:
        if not key:
            return None
        if "/" in key:
            return self.slashed(scope, key)
        if key[0] in ":^":
            return self.dotted(_top(scope), key[1:], False)
        return self.dotted(scope, key, True)


def lookup(scope: Scope, name: str, *, regex: bool) -> Found:
    """The entry `$name` names from `scope` (quoted keys match as patterns when `regex`:
    OpenFOAM matches them for ``$dict;`` merges, not for values or paths)."""
    results = []
    for dot_recursive in (False, True):  # OpenFOAM versions differ on `$a.b` from a sub-dict
        search = _Search(regex, dot_recursive)
        results.append((search.scoped(scope, name), search.doubt))
    (entry, doubt), (other, _) = results
    if entry is not other:
        return Found(entry or other, f"OpenFOAM versions find different entries for ${name}")
    if entry is not None and entry.doubt:
        doubt = doubt or entry.doubt
    return Found(entry, doubt)


def assign(scope: Scope, key: str, entry: Entry, *, pattern: bool, mode: str) -> None:
    """Add `entry` under `key` the way OpenFOAM does in input mode `mode` (merge,
    overwrite, protect, warn, error, default)."""
    existing = scope.entries.get(key)
    if existing is not None:
        if mode in ("protect", "warn", "error", "default"):
            if entry.doubt:
                existing.doubt = existing.doubt or entry.doubt
            return
        if mode == "merge" and existing.scope is not None and entry.scope is not None:
            for sub_key, sub in entry.scope.entries.items():
                pattern_key = any(p == sub_key for p, _ in entry.scope.patterns)
                assign(existing.scope, sub_key, sub, pattern=pattern_key, mode="merge")
                if entry.doubt:
                    sub.doubt = sub.doubt or entry.doubt
            if entry.scope.doubt:
                existing.scope.doubt = existing.scope.doubt or entry.scope.doubt
            if entry.doubt:
                existing.doubt = existing.doubt or entry.doubt
            return
        scope.patterns = [(p, e) for p, e in scope.patterns if p != key]
    scope.entries[key] = entry
    if pattern:
        scope.patterns.insert(0, (key, entry))


def remove(scope: Scope, names: list[tuple[str, bool]], *, doubt: str | None) -> None:
    """``#remove``: drop the entries matching `names` (each text and whether it is a
    pattern); with `doubt` (inside ``#ifeq``) only mark them. A pattern this module cannot
    read puts the whole dictionary in doubt."""
    for name, is_pattern in names:
        for key in list(scope.entries):
            matched = pattern_matches(name, key) if is_pattern else name == key
            if matched is None:
                scope.doubt = scope.doubt or f'#remove "{name}" may remove any entry'
                continue
            if not matched:
                continue
            if doubt:
                scope.entries[key].doubt = scope.entries[key].doubt or doubt
            else:
                del scope.entries[key]
                scope.patterns = [(p, e) for p, e in scope.patterns if p != key]


def scoped_target(scope: Scope, path: str) -> tuple[Scope, str, bool]:
    """Where a slash-scoped keyword (``"a/b/c"``, ``"/top/c"``, ``"../c"``) puts its entry:
    the dictionary (sub-dictionaries made as OpenFOAM makes them), the keyword, and whether
    it is a pattern (a last part in quotes)."""
    if path.startswith("/"):
        scope = _top(scope)
    parts = [p for p in path.split("/") if p not in ("", ".")]
    name = parts.pop() if parts else ""
    for part in parts:
        if part == "..":
            scope = scope.parent or scope
            continue
        found = scope.entries.get(part)
        if found is None or found.scope is None:
            sub = Scope(parent=scope)
            scope.entries[part] = Entry(part, "", scope=sub)
            found = scope.entries[part]
        assert found.scope is not None
        scope = found.scope
    pattern = name[:1] in "\"'"
    return scope, name.strip("\"'"), pattern
