"""The series a function object of a case will write, named exactly as the run agent names
them (orchestration.results.dat's `file_prefix` and `series_names`), for OpenFOAM v1912's output:
forces, forceCoeffs, surfaceFieldValue, volFieldValue, fieldMinMax (with ``location
false``; with locations it writes text columns runs do not record). A function object whose
columns cannot be predicted gets an open prefix (``<name>.``): any series under it is
accepted. Plain Python, no Django.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from orchestration.case.foamdict import FoamDict
from orchestration.results.dat import file_prefix, series_names

__all__ = ["FunctionObject", "field_classes", "function_object", "initial_dir", "is_vector"]


@dataclass(frozen=True)
class FunctionObject:
    name: str  # as in controlDict's functions (an #includeFunc's whole call)
    type: str
    series: tuple[str, ...]  # what it writes, exactly as the agent names it
    # the function object's series could not all be predicted: any `<prefix>…` is accepted
    open_prefix: str | None = None
    note: str = ""


def initial_dir(root: str) -> str | None:
    for name in ("0", "0.orig"):
        path = os.path.join(root, name)
        if os.path.isdir(path):
            return path
    return None


_CLASS = re.compile(rb"\bclass\s+(\w+)\s*;")


def field_classes(root: str) -> dict[str, str]:
    """Field name → its class (volScalarField, volVectorField, …), from the 0/ headers."""
    folder = initial_dir(root)
    out: dict[str, str] = {}
    if folder is None:
        return out
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as fh:
            head = fh.read(4096)
        match = _CLASS.search(head)
        if match:
            out[name.removesuffix(".gz")] = match.group(1).decode("ascii", "replace")
    return out


def is_vector(field_name: str, fields: dict[str, str]) -> bool:
    cls = fields.get(field_name)
    if cls is not None:
        return "Vector" in cls
    return field_name in ("U", "U.air", "U.water", "B", "wallShearStress")


_FORCE_GROUPS = (
    "(total_x total_y total_z)",
    "(pressure_x pressure_y pressure_z)",
    "(viscous_x viscous_y viscous_z)",
)
_FORCE_COEFFS = (
    "Cd",
    "Cs",
    "Cl",
    "CmRoll",
    "CmPitch",
    "CmYaw",
    "Cd(f)",
    "Cd(r)",
    "Cs(f)",
    "Cs(r)",
    "Cl(f)",
    "Cl(r)",
)  # v1912's coefficient.dat header
_NO_SERIES = {
    "solverInfo": "writes solver names and flags beside its numbers; use the residual.* series",
    "residuals": "writes solver names and flags beside its numbers; use the residual.* series",
    "probes": "writes files without .dat, which runs do not record",
    "yPlus": "writes a patch name column, which runs do not record",
    "wallShearStress": "writes a patch name column, which runs do not record",
    "streamLine": "writes geometry, not series",
    "wallBoundedStreamLine": "writes geometry, not series",
    "surfaces": "writes surfaces, not series",
    "sets": "writes sampled lines, not series",
    "cuttingPlane": "writes surfaces, not series",
    "vtkWrite": "writes VTK files, not series",
    "ensightWrite": "writes EnSight files, not series",
}
# function objects that compute fields (written at write times), not series
_FIELD_WRITERS = (
    "components mag magSqr grad div curl vorticity Q Lambda2 CourantNo PecletNo MachNo "
    "enstrophy streamFunction turbulenceFields writeObjects writeCellCentres writeCellVolumes "
    "nearWallFields ddt add subtract randomise flowType pressure fieldAverage scale "
    "lambVector processorField"
).split()
_NO_SERIES.update(
    {kind: "computes fields (written with the case), not series" for kind in _FIELD_WRITERS}
)


def function_object(name: str, entry: FoamDict, fields: dict[str, str]) -> FunctionObject:
    kind = entry.word("type") or "?"

    def first(stem: str) -> str:  # the prefix of its first (only) file
        return file_prefix(name, stem, stem)

    if kind == "forceCoeffs":
        prefix = first("coefficient")
        return FunctionObject(
            name, kind, tuple(s for c in _FORCE_COEFFS for s in series_names(prefix, c, None))
        )
    if kind == "forces":
        out: list[str] = []
        for stem in ("force", "moment"):
            prefix = file_prefix(name, stem, "force")
            for group in _FORCE_GROUPS:
                out.extend(series_names(prefix, group, 3))
        return FunctionObject(name, kind, tuple(out))
    if kind in ("surfaceFieldValue", "volFieldValue", "surfaceRegion", "volRegion"):
        operation = entry.word("operation") or "none"
        names = entry.words("fields") or entry.words("field")
        if operation == "none":
            return FunctionObject(name, kind, (), note="operation none writes no values")
        prefix = first(kind)
        out = []
        if kind.startswith("surface") and entry.word("writeArea") in ("true", "yes", "on"):
            out.extend(series_names(prefix, "Area", None))
        weight = entry.word("weightField")
        for fname in names:
            column = f"{operation}({fname})"
            if weight and operation.startswith("weighted"):
                column = f"{operation}({weight},{fname})"
            scalar = not is_vector(fname, fields) or operation.startswith("areaNormal")
            out.extend(series_names(prefix, column, None if scalar else 3))
        placeholder = any("{{" in f for f in names)
        return FunctionObject(
            name, kind, tuple(out), open_prefix=prefix if (placeholder or weight) else None
        )
    if kind == "fieldMinMax":
        names = entry.words("fields")
        prefix = first("fieldMinMax")
        if entry.word("location") not in ("false", "no", "off"):
            return FunctionObject(
                name,
                kind,
                (),
                note="writes each field's name and location as text, which runs do not record; "
                "add `location false;` to record min(field) and max(field)",
            )
        out = []
        vectors = False
        for fname in names:
            if is_vector(fname, fields):
                vectors = True
                continue
            out.extend(series_names(prefix, f"min({fname})", None))
            out.extend(series_names(prefix, f"max({fname})", None))
        return FunctionObject(name, kind, tuple(out), open_prefix=prefix if vectors else None)
    if kind in _NO_SERIES:
        return FunctionObject(name, kind, (), note=_NO_SERIES[kind])
    return FunctionObject(
        name,
        kind,
        (),
        open_prefix=f"{name}.",
        note=f"a {kind} function object: its series are named {name}.<column> (known once a run writes them)",
    )
