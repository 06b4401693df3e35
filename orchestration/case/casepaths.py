"""Where a case's ``#include``s lead, and which library names and function calls it may give.

OpenFOAM expands an include's path (``stringOps::inplaceExpand``) with the dictionary's
variables first and the environment's after (an unset one is an empty string: ``"$nope/etc/
passwd"`` reads ``/etc/passwd``), then ``~``, ``./`` and the tags ``<case>``, ``<system>``,
``<constant>``. Here a path is expanded the same way from what the case itself defines, and
anything that would depend on the environment, on a value this check cannot know, or on
white space or quotes OpenFOAM strips is refused. What remains must stay inside the case
(``#include``) or name a file of OpenFOAM's etc folder (``#includeEtc``).

Plain Python, no Django (orchestration.case.casecheck, orchestration.case.foamdict).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable

__all__ = [
    "LIBRARY_NAME",
    "PathRefused",
    "case_include",
    "case_variable",
    "check_call",
    "etc_include",
    "expand_path",
]

# what a path may hold once expanded; $ { } : < > only while it has variables or a tag
_PLAIN = re.compile(r"[A-Za-z0-9_.,+=@%/-]*")
_RAW = re.compile(r"[A-Za-z0-9_.,+=@%/${}:<>-]*")
_NAME_CHARS = re.compile(r"[A-Za-z0-9_.:]+")  # a $name in a path (stringOps' characters)
_TAGS = {"<case>": "", "<system>": "system", "<constant>": "constant"}
_CASE = "\x00case"  # $FOAM_CASE, where the dictionary does not define FOAM_CASE
# a shared library by name: OpenFOAM's own, or the backend's (no path, no variable)
LIBRARY_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
# #includeFunc's argument: a function object's name, with arguments in parentheses
_CALL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*(?:\([A-Za-z0-9_.,=()\[\]:+*<>|^-]*\))?")

Lookup = Callable[[str], str]


class PathRefused(ValueError):
    """The path is refused; the message says why and what to write instead."""


def expand_path(raw: str, lookup: Lookup) -> str:
    """`raw` (an include's file name as written) with its ``$name`` and ``${name}``
    expanded by `lookup` (which returns a variable's text or raises PathRefused)."""
    if raw.startswith("~"):
        raise PathRefused("a path from a home folder (~) is not part of the case")
    if not _RAW.fullmatch(raw):
        bad = sorted({c for c in raw if not _RAW.fullmatch(c)})
        shown = " ".join(repr(c) for c in bad)
        raise PathRefused(
            f"the path holds {shown}; write it with letters, digits and . _ - + / only "
            "(OpenFOAM drops white space and quotes from a path)"
        )
    out, i = [], 0
    while True:
        j = raw.find("$", i)
        if j < 0:
            out.append(raw[i:])
            break
        out.append(raw[i:j])
        if raw.startswith("${", j):
            end = raw.find("}", j)
            name = raw[j + 2 : end] if end > 0 else ""
            if end < 0 or not _NAME_CHARS.fullmatch(name) or ":-" in name or ":+" in name:
                raise PathRefused(
                    f"{raw[j : end + 1 if end > 0 else None]!r} is not a plain ${{name}}; write "
                    "the path out"
                )
            i = end + 1
        else:
            match = _NAME_CHARS.match(raw, j + 1)
            if not match:
                raise PathRefused("a $ with no variable name after it")
            name, i = match.group(), match.end()
        out.append(lookup(name))
    return "".join(out)


def case_variable(name: str) -> str:
    """The value of a variable that no dictionary defines: only $FOAM_CASE is known."""
    if name == "FOAM_CASE":
        return _CASE
    raise PathRefused(
        f"${name} is not defined in the case's dictionaries (OpenFOAM would take it from "
        "the environment, or as nothing); define it in the dictionary or write the path out"
    )


def case_include(expanded: str, base: str) -> str:
    """The case-relative path an ``#include`` of `expanded` (already expanded) reads from
    the folder `base` (case-relative, "" for the case's top), or PathRefused."""
    if not expanded:
        raise PathRefused("the path is empty")
    if expanded.startswith(_CASE):
        rest = expanded[len(_CASE) :]
        if rest and not rest.startswith("/"):
            raise PathRefused("$FOAM_CASE must be followed by / and a path in the case")
        start, rest = "", rest.lstrip("/")
    elif expanded.startswith("<"):
        tag, _, rest = expanded.partition("/")
        if tag not in _TAGS:
            raise PathRefused(
                f"{tag} is not a folder of the case (use <case>, <system> or <constant>)"
            )
        start = _TAGS[tag]
    elif expanded.startswith("/"):
        raise PathRefused("an absolute path is outside the case")
    else:
        start, rest = base, expanded
    if not _PLAIN.fullmatch(rest):
        raise PathRefused(
            "the path holds characters a file of the case does not need ($, {, }, :, <, > or "
            "$FOAM_CASE left after expansion)"
        )
    candidates = [posixpath.join(start, rest)]
    if start == base and (rest == "." or rest.startswith("./")):
        candidates.append(rest)  # './' is the working folder to some OpenFOAM versions
    for candidate in candidates:
        normal = posixpath.normpath(candidate)
        if normal == ".." or normal.startswith("../") or normal.startswith("/"):
            raise PathRefused("the path climbs out of the case with '..'")
    return posixpath.normpath(candidates[0])


def etc_include(expanded: str, etc_dir: str | None) -> str:
    """The name an ``#includeEtc`` of `expanded` reads in OpenFOAM's etc folder, or
    PathRefused (an absolute path, ``..``, a name that is not there)."""
    if expanded.startswith((_CASE, "/", "<", ".")) or not _PLAIN.fullmatch(expanded):
        raise PathRefused(
            "#includeEtc takes a name inside OpenFOAM's etc folder, e.g. "
            "caseDicts/setConstraintTypes (no absolute path, no variable, no tag)"
        )
    parts = [p for p in expanded.split("/") if p not in ("", ".")]
    if ".." in parts or not parts:
        raise PathRefused("#includeEtc takes a name inside OpenFOAM's etc folder, without '..'")
    name = "/".join(parts)
    if etc_dir is not None:
        path = os.path.join(etc_dir, name)
        if not (os.path.isfile(path) or os.path.isfile(path + ".gz")):
            raise PathRefused(f"OpenFOAM's etc folder has no {name}")
    return name


def check_call(call: str) -> None:
    """``#includeFunc``'s argument: a function object's name, maybe with arguments, made of
    plain characters (no path, variable, quote, space or directive)."""
    if not _CALL.fullmatch(call):
        raise PathRefused(
            "#includeFunc takes a function object's name, with arguments in parentheses "
            "made of letters, digits and . , = ( ) [ ] : + - * (e.g. patchAverage(name=outlet,p))"
        )
