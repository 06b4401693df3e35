"""The type of each ``{{ placeholder }}`` of a case, read from where it stands.

A whole number where the keyword counts something (``nCellsBetweenLevels {{ n }};``, a
blockMesh ``hex`` block's cell counts) or the expression rounds (``| int``, ``round(…)``);
text in quotes or where a keyword takes a word (``type {{ bc }};``); a vector where a vector
stands alone (``uniform {{ U }}`` in a vector field, ``CofR {{ c }};``); else a number.
The wizard shows them; the study spec checks values against parameters as before.

Plain Python, no Django.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from orchestration.case import casefiles, render

__all__ = ["Placeholder", "placeholders_typed"]

_INTEGER_KEYS = {
    "nCellsBetweenLevels",
    "maxGlobalCells",
    "maxLocalCells",
    "minRefinementCells",
    "nSmoothPatch",
    "nSolveIter",
    "nRelaxIter",
    "nLayerIter",
    "nSurfaceLayers",
    "nSmoothScale",
    "nSmoothNormals",
    "nSmoothThickness",
    "nSmoothSurfaceNormals",
    "nGrow",
    "nBufferCellsNoExtrude",
    "nFeatureSnapIter",
    "nSnap",
    "maxIter",
    "nSweeps",
    "nPreSweeps",
    "nPostSweeps",
    "nCellsInCoarsestLevel",
    "nFinestSweeps",
    "nOuterCorrectors",
    "nCorrectors",
    "nNonOrthogonalCorrectors",
    "numberOfSubdomains",
    "level",
    "levels",
    "purgeWrite",
    "writePrecision",
    "timePrecision",
    "nAlphaCorr",
    "nAlphaSubCycles",
    "nPoints",
    "nLines",
    "nSubCycle",
    "maxIters",
    "nCells",
    "nLayers",
    "nIter",
    "writeInterval",
}
_WORD_KEYS = {
    "application",
    "type",
    "solver",
    "smoother",
    "preconditioner",
    "method",
    "operation",
    "regionType",
    "name",
    "patch",
    "mode",
    "RASModel",
    "LESModel",
    "model",
    "simulationType",
    "writeControl",
    "startFrom",
    "stopAt",
    "writeFormat",
    "timeFormat",
    "transportModel",
    "rho",
    "interpolationScheme",
    "setFormat",
    "surfaceFormat",
    "distance",
    "delta",
}
_VECTOR_KEYS = {
    "CofR",
    "liftDir",
    "dragDir",
    "pitchAxis",
    "rollAxis",
    "yawAxis",
    "flowVelocity",
    "locationInMesh",
    "point",
    "origin",
    "axis",
    "direction",
    "normal",
    "centre",
    "g",
    "value",
    "Uinf",
    "UInf",
    "flowDir",
    "e1",
    "e2",
    "e3",
}
# fvSchemes: a scheme's entry is words (``bounded Gauss linearUpwind grad(U);``); a number
# stands only after a scheme that takes a coefficient (``limitedLinear 1``, ``limited 0.5``,
# ``cellLimited Gauss linear 1``, ``limited corrected 0.33``, ``CrankNicolson 0.9``)
_COEFFICIENT_SCHEMES = {
    "limited",
    "cellLimited",
    "faceLimited",
    "cellMDLimited",
    "faceMDLimited",
    "limitedLinear",
    "limitedLinearV",
    "limitedLinear01",
    "limitedLimitedLinear",
    "limitedCubic",
    "limitedCubicV",
    "limitedCubic01",
    "limitedVanLeer",
    "limitedMUSCL",
    "limitedGamma",
    "Gamma",
    "GammaV",
    "Gamma01",
    "blended",
    "CrankNicolson",
    "localBlended",
    "cellCoBlended",
    "CoBlended",
    "deferred",
}
_STRING_FILTER = re.compile(r"\|\s*(string|lower|upper|title|capitalize|replace|join|trim)\b")
_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.S)
_INTEGER_EXPR = re.compile(r"\|\s*int\b|\b(round|floor|ceil)\s*\(|\|\s*round\b")


@dataclass(frozen=True)
class Placeholder:
    name: str
    type: str  # number | integer | text | vector
    line: int


def placeholders_typed(root: str | os.PathLike[str]) -> dict[str, tuple[Placeholder, ...]]:
    """Relative path → its placeholders, each named once with its type and first line: a
    whole number where the keyword counts something (``nCellsBetweenLevels {{ n }};``, a
    blockMesh ``hex`` cell count) or the expression rounds (``| int``, ``round(…)``); text in
    quotes or where a keyword takes a word (``type {{ bc }};``); a vector where a vector
    stands alone (``uniform {{ U }}`` in a vector field, ``CofR {{ c }};``); else a number."""
    root = os.fspath(root)
    found = render.find_placeholders(Path(root))  # validates every template; RenderError if broken
    out: dict[str, tuple[Placeholder, ...]] = {}
    for rel, names in found.items():
        text = casefiles.read_template(os.path.join(root, rel)) or ""
        vector_file = "volVectorField" in text[:4096]
        seen: dict[str, Placeholder] = {}
        for match in _PLACEHOLDER.finditer(text):
            expr = match.group(1)
            try:
                used = render.expression_names(expr.strip())
            except casefiles.RenderError:
                continue
            kind = _placeholder_type(text, match.start(), match.end(), expr, vector_file)
            line = text.count("\n", 0, match.start()) + 1
            for name in sorted(used & set(names)):
                if name not in seen:
                    seen[name] = Placeholder(name, kind, line)
        out[rel] = tuple(seen[n] for n in names if n in seen)
    return out


def _placeholder_type(text: str, start: int, end: int, expr: str, vector_file: bool) -> str:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    before = text[line_start:start]
    after = text[end : line_end if line_end >= 0 else len(text)]
    if _INTEGER_EXPR.search(expr):
        return "integer"
    if before.count('"') % 2 == 1 or _STRING_FILTER.search(expr):
        return "text"
    words = before.split()
    key = words[0] if words else ""
    if words and _enclosing_block(text, line_start).endswith("Schemes"):
        return _scheme_entry_type(words)
    previous = text[text.rfind("\n", 0, max(line_start - 1, 0)) + 1 : line_start].split()
    if key.startswith("hex") or (key.startswith("(") and previous[:1] == ["hex"]):
        return "integer"  # a blockMesh block's cell counts
    if key in _INTEGER_KEYS:
        return "integer"
    inside = before.count("(") > before.count(")")
    if key in _WORD_KEYS and not inside:
        return "text"
    if not inside and after.lstrip().startswith(";"):
        if key in _VECTOR_KEYS and key != "value":
            return "vector"
        if words and words[-1] == "uniform" and vector_file:
            return "vector"
    return "number"


def _enclosing_block(text: str, pos: int) -> str:
    """The name of the innermost ``name { … }`` block that `pos` is in ("" at the top)."""
    plain = _PLACEHOLDER.sub(lambda m: " " * len(m.group(0)), text[:pos])
    plain = re.sub(r"//[^\n]*|/\*.*?\*/", " ", plain, flags=re.S)  # braces in comments
    names: list[str] = []
    for match in re.finditer(r"[{}]", plain):
        if match.group(0) == "{":
            head = plain[: match.start()].rstrip().rsplit(None, 1)
            names.append(head[-1] if head else "")
        elif names:
            names.pop()
    return names[-1] if names else ""


def _scheme_entry_type(words: list[str]) -> str:
    """A placeholder in an fvSchemes entry (`words`: the entry's tokens before it): a number
    right after a scheme that takes a coefficient, else a word (a scheme's name or its
    arguments, e.g. ``linearUpwind grad(U)``)."""
    value = words[1:]  # the entry's key (``div(phi,U)``, ``default``) is not a scheme
    if value and (
        value[-1] in _COEFFICIENT_SCHEMES
        or (value[-1] == "corrected" and len(value) > 1 and value[-2] in _COEFFICIENT_SCHEMES)
    ):
        return "number"
    return "text"
