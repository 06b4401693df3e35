"""What a case's ``libs`` entries may hold: names of the backend's libraries, nothing else.

OpenFOAM opens, as shared libraries, the lists under ``libs`` (controlDict, function
objects, fvOptions), ``functionObjectLibs``, ``motionSolverLibs`` and the GAMG
agglomeration ``…Libs`` keys, and finds a quoted keyword by pattern (``"l.bs"`` is
``libs``). A name (``fieldFunctionObjects``, ``"libmyBC.so"``) is looked for where the
backend keeps its libraries; a path (``"./x.so"``, ``$FOAM_CASE/x.so``, ``/tmp/x.so``)
would load a library of the case's own, and run its code.

Plain Python, no Django (orchestration.case.dictcheck).
"""

from __future__ import annotations

from collections.abc import Iterator

from orchestration.case.casepaths import LIBRARY_NAME
from orchestration.case.foamscope import pattern_matches
from orchestration.case.foamtokens import Token

__all__ = ["LIBS_KEYS", "block_entries", "libs_key", "libs_problem"]

# the keywords whose lists OpenFOAM opens as shared libraries (dlLibraryTable)
LIBS_KEYS = (
    "libs",
    "functionObjectLibs",
    "motionSolverLibs",
    "geometricGAMGAgglomerationLibs",
    "algebraicGAMGAgglomerationLibs",
)
_EXAMPLE = '(e.g. libs ("libfieldFunctionObjects.so");)'


def libs_key(key: Token) -> str | None:
    """How the keyword `key` reads as a libs-like keyword (for messages), or None. A
    slash-scoped keyword (``"functions/f/libs"``) is its last part."""
    if key.placeholder:
        return f"{key.text} (a placeholder that may write libs)"
    text, pattern = key.text, key.kind == "string"
    if "/" in text:
        text = text.rstrip("/").rsplit("/", 1)[-1]
        pattern = text[:1] in "\"'"
        text = text.strip("\"'")
    if not pattern:
        return key.text if text in LIBS_KEYS else None
    for name in LIBS_KEYS:
        matched = pattern_matches(text, name)
        if matched is None:
            return f'"{key.text}" (a pattern that may match {name})'
        if matched:
            return key.text if key.text == name else f'"{key.text}" (read as {name})'
    return None


def libs_problem(key: Token, tokens: list[Token]) -> str | None:
    """What is wrong with the entry `key` `tokens` (its value, variables expanded) if its
    keyword reads as libs; None when it names libraries only. A keyword a placeholder
    writes is checked in each run's rendered case (orchestration.case.render); a pattern that
    may or may not match libs, for its names only."""
    label = libs_key(key)
    if label is None or key.placeholder:
        return None
    if " may match " in label:
        for item in tokens:
            if item.kind in ("number", "punct", "data"):
                continue
            named = item.kind in ("word", "string") and not item.placeholder
            if not (named and LIBRARY_NAME.fullmatch(item.text)):
                return f"{label} holds {item.text!r}: write library names only {_EXAMPLE}"
        return None
    items = tokens[1:] if tokens and tokens[0].kind == "number" else tokens
    if items and items[0].kind == "punct" and items[0].text == "(":
        if not (items[-1].kind == "punct" and items[-1].text == ")"):
            return f"{label} is not a list of library names in ( ) {_EXAMPLE}"
        items = items[1:-1]
    for item in items:
        if item.kind in ("word", "string") and not item.placeholder:
            if LIBRARY_NAME.fullmatch(item.text):
                continue
            return (
                f"{label} names {item.text!r}, a library file of the case; a case may load "
                f"the backend's libraries by name only {_EXAMPLE}"
            )
        what = item.text if item.kind == "unknown" else f"{item.text!r} ({item.kind})"
        if item.placeholder:
            what = f"a placeholder ({item.text})"
        return f"{label} holds {what}: a library list must be written out as names {_EXAMPLE}"
    return None


def _is(token: Token, chars: str) -> bool:
    return token.kind == "punct" and token.text in chars


def block_entries(tokens: list[Token]) -> Iterator[tuple[Token, list[Token]]]:
    """The libs-like entries inside a value's ( ) and { } blocks (a list of function
    objects, of patches: dictionaries once something reads them), with their values."""
    if not any(_is(t, "({") for t in tokens):
        return
    stack: list[str] = []
    start = False
    for i, token in enumerate(tokens):
        if _is(token, "({"):
            stack.append(token.text)
            start = True
            continue
        if _is(token, ")}"):
            if stack:
                stack.pop()
            start = bool(stack)
            continue
        if _is(token, ";"):
            start = bool(stack)
            continue
        if start and token.kind in ("word", "string") and libs_key(token) is not None:
            end, depth = i + 1, 0
            while end < len(tokens):
                t = tokens[end]
                if _is(t, "({"):
                    depth += 1
                elif _is(t, ")}"):
                    if depth == 0:
                        break
                    depth -= 1
                elif _is(t, ";") and depth == 0:
                    break
                end += 1
            yield token, tokens[i + 1 : end]
        start = False
