"""What an OpenFOAM case will do, read from its files before it runs.

`inspect_case(case_dir)` gives the solver its controlDict names (``application``), its
function objects with the exact series each will write (named by orchestration.results.dat's
`series_names`, the code the run agent names them with, so the two cannot disagree), the
residual series its solver log will give (named as orchestration.results.logparse names them), its
``{{ placeholders }}`` per file with a type read from where they stand, and its mesh steps.

Plain Python, no Django; it reads files only and runs nothing of the case.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from orchestration.case import casefiles, foamdict
from orchestration.case.foamdict import DictError, FoamDict
from orchestration.case.funcobjects import (
    FunctionObject,
    field_classes,
    function_object,
    initial_dir,
    is_vector,
)
from orchestration.case.placeholdertypes import Placeholder, placeholders_typed

__all__ = [
    "FunctionObject",
    "Inspection",
    "Placeholder",
    "inspect_case",
    "placeholders_typed",
    "series_known",
]

_COMPONENTS = ("x", "y", "z")
# turbulence models → the fields they solve (the rest of a case's 0/ files are not solved)
_TURBULENCE_FIELDS = {
    "k",
    "epsilon",
    "omega",
    "nuTilda",
    "v2",
    "f",
    "ReThetat",
    "gammaInt",
    "kl",
    "kt",
    "R",
}
_MODEL_FIELDS = {
    "kEpsilon": ("k", "epsilon"),
    "realizableKE": ("k", "epsilon"),
    "RNGkEpsilon": ("k", "epsilon"),
    "LaunderSharmaKE": ("k", "epsilon"),
    "ShihQuadraticKE": ("k", "epsilon"),
    "LienCubicKE": ("k", "epsilon"),
    "kOmega": ("k", "omega"),
    "kOmegaSST": ("k", "omega"),
    "kOmegaSSTSAS": ("k", "omega"),
    "kOmegaSSTLM": ("k", "omega", "ReThetat", "gammaInt"),
    "kkLOmega": ("kt", "kl", "omega"),
    "v2f": ("k", "epsilon", "v2", "f"),
    "SpalartAllmaras": ("nuTilda",),
    "SpalartAllmarasDDES": ("nuTilda",),
    "SpalartAllmarasIDDES": ("nuTilda",),
    "SpalartAllmarasDES": ("nuTilda",),
    "LRR": ("R", "epsilon"),
    "SSG": ("R", "epsilon"),
    "kEqn": ("k",),
    "dynamicKEqn": ("k",),
    "Smagorinsky": (),
    "WALE": (),
    "dynamicLagrangian": (),
}
# log series every solver of the kind gives, beside residuals (offered, never required)
_LOG_PREFIXES = ("residual.", "residual_final.", "continuity.", "courant.", "execution.")

# mesh utilities, in the order a case runs them, and the dictionary that says a case uses one
_MESH_DICTS = (
    ("blockMesh", ("system/blockMeshDict", "constant/polyMesh/blockMeshDict")),
    ("surfaceFeatureExtract", ("system/surfaceFeatureExtractDict", "system/surfaceFeaturesDict")),
    ("snappyHexMesh", ("system/snappyHexMeshDict",)),
    ("extrudeMesh", ("system/extrudeMeshDict",)),
    ("topoSet", ("system/topoSetDict",)),
    ("createPatch", ("system/createPatchDict",)),
    ("refineMesh", ("system/refineMeshDict",)),
    ("mirrorMesh", ("system/mirrorMeshDict",)),
)
_MESH_UTILITIES = {name for name, _ in _MESH_DICTS} | {
    "extrude2DMesh",
    "transformPoints",
    "renumberMesh",
    "checkMesh",
    "setFields",
    "surfaceFeatures",
    "refineWallLayer",
    "splitMeshRegions",
    "changeDictionary",
    "mapFields",
    "createBaffles",
    "subsetMesh",
    "fluentMeshToFoam",
    "gmshToFoam",
    "ideasUnvToFoam",
    "foamyHexMesh",
    "cartesianMesh",
    "PDRblockMesh",
}
_RUNNERS = {"runApplication", "runParallel", "runApp", "mpirun", "foamJob"}


@dataclass(frozen=True)
class Inspection:
    solver: str | None
    function_objects: tuple[FunctionObject, ...]
    residuals: tuple[str, ...]
    placeholders: dict[str, tuple[Placeholder, ...]]
    mesh_steps: tuple[str, ...]
    has_mesh: bool
    errors: tuple[str, ...] = ()  # what could not be read (the rest is still given)
    notes: tuple[str, ...] = field(default=())

    @property
    def series(self) -> list[str]:
        """Every series a run of the case will send (function objects, then residuals)."""
        out = [s for fo in self.function_objects for s in fo.series]
        return out + [s for s in self.residuals if s not in out]

    @property
    def open_prefixes(self) -> list[str]:
        return [fo.open_prefix for fo in self.function_objects if fo.open_prefix]

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["series"] = self.series
        data["open_prefixes"] = self.open_prefixes
        data["placeholders"] = {
            rel: [asdict(p) for p in items] for rel, items in self.placeholders.items()
        }
        return data


def series_known(inspection: dict[str, Any], name: str) -> bool:
    """Whether a run of the inspected case can send series `name` (an inspection's JSON)."""
    if name in inspection.get("series", []):
        return True
    if any(name.startswith(p) for p in inspection.get("open_prefixes", [])):
        return True
    if name.startswith("residual_final."):  # the final residual of a field solved
        return "residual." + name.removeprefix("residual_final.") in inspection.get("series", [])
    # log series beside residuals: the solver decides (continuity, Courant, execution time)
    return name.startswith(_LOG_PREFIXES[2:])


# -- the case ----------------------------------------------------------------------------


def inspect_case(case_dir: str | os.PathLike[str], *, etc_dir: str | None = None) -> Inspection:
    """Read the case at `case_dir` (OpenFOAM's etc folder, for #includeEtc/#includeFunc, at
    `etc_dir` or $WM_PROJECT_DIR/etc when present). Never raises on a case's content: what
    cannot be read is in `errors`, naming the file and line."""
    root = os.fspath(case_dir)
    if etc_dir is None:
        guess = os.path.join(os.environ.get("WM_PROJECT_DIR", "/usr/share/openfoam"), "etc")
        etc_dir = guess if os.path.isdir(guess) else None
    errors: list[str] = []
    notes: list[str] = []

    def read(rel: str) -> FoamDict | None:
        path = os.path.join(root, rel)
        if not os.path.isfile(path) and os.path.isfile(path + ".gz"):
            path += ".gz"
        if not os.path.isfile(path):
            return None
        try:
            return foamdict.parse_file(path, case_root=root, etc_dir=etc_dir, notes=notes)
        except DictError as exc:
            errors.append(str(exc))
        except OSError as exc:
            errors.append(f"{rel}: {exc.strerror}")
        return None

    control = read("system/controlDict")
    solver = None
    if control is None and not errors:
        errors.append("system/controlDict is missing")
    elif control is not None:
        solver = control.word("application")
        if solver and (solver.startswith("{{") or not re.fullmatch(r"[A-Za-z][\w.-]*", solver)):
            notes.append(f"controlDict's application is {solver!r}, not a solver name")
            solver = None
    fields = field_classes(root)
    function_objects: list[FunctionObject] = []
    functions = control.get("functions") if control is not None else None
    if isinstance(functions, FoamDict):
        for name, entry in functions.entries.items():
            if isinstance(entry, FoamDict):
                function_objects.append(function_object(name, entry, fields))
    residuals = _residuals(root, read, fields, notes)
    mesh_steps, has_mesh = _mesh_steps(root)
    try:
        placeholders = placeholders_typed(root)
    except casefiles.RenderError as exc:
        errors.append(str(exc))
        placeholders = {}
    return Inspection(
        solver=solver,
        function_objects=tuple(function_objects),
        residuals=tuple(residuals),
        placeholders=placeholders,
        mesh_steps=tuple(mesh_steps),
        has_mesh=has_mesh,
        errors=tuple(errors),
        notes=tuple(dict.fromkeys(notes)),
    )


# -- residuals ---------------------------------------------------------------------------


def _solver_keys(solution: FoamDict | None) -> list[re.Pattern[str]]:
    solvers = solution.get("solvers") if solution is not None else None
    if not isinstance(solvers, FoamDict):
        return []
    out: list[re.Pattern[str]] = []
    for key in solvers.entries:
        try:
            out.append(re.compile(key))
        except re.error:
            out.append(re.compile(re.escape(key)))
    return out


def _residuals(root: str, read: Any, fields: dict[str, str], notes: list[str]) -> list[str]:
    """The residual series the solver log will give: the case's fields that fvSolution has a
    solver for, less turbulence fields its model does not solve; vectors by component, less z
    in a 2-D case (an `empty` patch)."""
    keys = _solver_keys(read("system/fvSolution"))
    if not keys:
        return []
    candidates = [f for f in fields if not f.endswith((".orig", ".orig.gz", "~"))]
    energy = _energy_field(read)
    if energy and energy not in candidates:
        candidates.append(energy)
    solved = [f for f in candidates if any(k.fullmatch(f) for k in keys)]
    model_fields = _turbulence_fields(read)
    if model_fields is not None:
        solved = [f for f in solved if f not in _TURBULENCE_FIELDS or f in model_fields]
    two_d = _is_2d(root)
    out: list[str] = []
    for name in solved:
        if is_vector(name, fields):
            comps = _COMPONENTS[:2] if two_d else _COMPONENTS
            out.extend(f"residual.{name}{c}" for c in comps)
        else:
            out.append(f"residual.{name}")
    return out


def _energy_field(read: Any) -> str | None:
    """h or e, the energy a compressible solver solves for (thermophysicalProperties)."""
    thermo = read("constant/thermophysicalProperties")
    mixture = thermo.get("thermoType") if thermo is not None else None
    if not isinstance(mixture, FoamDict):
        return None
    energy = mixture.word("energy") or ""
    return "h" if "Enthalpy" in energy else "e" if "Energy" in energy else None


def _turbulence_fields(read: Any) -> set[str] | None:
    props = read("constant/momentumTransport") or read("constant/turbulenceProperties")
    if props is None:
        return None
    kind = props.word("simulationType")
    if kind == "laminar":
        return set()
    sub = props.get(kind or "")
    model = None
    if isinstance(sub, FoamDict):
        model = sub.word("RASModel") or sub.word("LESModel") or sub.word("model")
    return set(_MODEL_FIELDS[model]) if model in _MODEL_FIELDS else None


def _is_2d(root: str) -> bool:
    folder = initial_dir(root)
    for rel in ("U", "U.gz"):
        path = os.path.join(folder, rel) if folder else ""
        if path and os.path.isfile(path):
            with open(path, "rb") as fh:
                return re.search(rb"type\s+empty\s*;", fh.read(1 << 20)) is not None
    return False


# -- mesh --------------------------------------------------------------------------------


def _mesh_steps(root: str) -> tuple[list[str], bool]:
    has_mesh = any(
        os.path.isfile(os.path.join(root, "constant/polyMesh", n)) for n in ("points", "points.gz")
    )
    steps: list[str] = []
    for script in ("Allrun", "Allrun.pre", "Allmesh"):
        path = os.path.join(root, script)
        if os.path.isfile(path) and os.path.getsize(path) < 1 << 20:
            with open(path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    words = line.split("#", 1)[0].split()
                    if not words or (words[0] not in _RUNNERS and words[0] not in _MESH_UTILITIES):
                        continue
                    command = next((w for w in words if w in _MESH_UTILITIES), None)
                    if command and command not in steps:
                        steps.append(command)
    if not steps:
        for utility, rels in _MESH_DICTS:
            if any(
                os.path.isfile(os.path.join(root, r))
                or os.path.isfile(os.path.join(root, r + ".gz"))
                for r in rels
            ):
                steps.append(utility)
    return steps, has_mesh
