"""Post-processing of a finished case: its final flow fields on a plane, and Cp on the body.

Stdlib only, and self-contained: the agent runs this file inside the run's sandbox as
`python3 -I -c <this file's text> [--fields k,omega] [--out windtunnel/fields.json]`, with the
case as its working directory (a tenant's case is hostile: its files are read only there, by
the run's own unprivileged uid). It reads the case's ASCII polyMesh and the latest time's
fields and writes one compact JSON artifact (docs/agent-protocol.md#flow-fields):

- a 2-D case (one cell thick, with `empty` patches) is cut at the middle of its thin axis,
  a 3-D case by the plane z = middle of its bounding box; each cell the plane crosses gives a
  polygon, and the fields are sampled (cell values) on a regular grid of at most
  GRID_POINTS points per region ("domain", and "body" around the force patches when there
  are any), null outside the mesh;
- the outline of the wall and force patches on that plane;
- the surface pressure coefficient along the patches of the case's forces/forceCoeffs
  function object: Cp = (p - pRef) / (1/2 rhoInf magUInf^2) (rhoInf only when p is not
  kinematic), against x/c with c the patches' extent along the plane's first axis.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import sys

GRID_POINTS = 20_000  # per field and region
MAX_CP_POINTS = 4_000
MAX_OUTLINE_SEGMENTS = 20_000
MAX_EXTRA_FIELDS = 8
# the converter is plain Python: past this much mesh text (about 1.5 million cells) it would
# hold the run's slot for minutes, so such a case gets its VTK files only
MAX_MESH_BYTES = 400 * 1024 * 1024
DEFAULT_FIELDS = ("p", "U")
VERSION = 1
ARTIFACT = "windtunnel/fields.json"  # relative to the case

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_TOKEN = re.compile(r'"[^"]*"|[{}();]|[^\s{}();"]+')


class FieldsError(Exception):
    """The case cannot be post-processed (binary format, no mesh, no time, …)."""


# -- reading OpenFOAM files --------------------------------------------------------------


def _read(path: str) -> str:
    if not os.path.isfile(path) and os.path.isfile(path + ".gz"):
        with gzip.open(path + ".gz", "rb") as fh:
            data = fh.read()
    else:
        with open(path, "rb") as fh:
            data = fh.read()
    text = data.decode("latin-1")
    head = text[:4000]
    if re.search(r"\bformat\s+binary\s*;", head):
        raise FieldsError(f"{path} is written in binary: set writeFormat ascii in controlDict")
    return text


def _strip_header(text: str) -> str:
    text = _COMMENTS.sub(" ", text)
    match = re.search(r"FoamFile\s*\{[^}]*\}", text)
    return text[match.end() :] if match else text


def _list_body(text: str) -> str:
    """The text inside the outermost list `N ( … )` of a mesh file."""
    body = _strip_header(text)
    match = re.search(r"(\d+)\s*\(", body)
    if not match:
        raise FieldsError("no list found")
    end = body.rfind(")")
    return body[match.end() : end]


def read_points(case: str) -> list[tuple[float, float, float]]:
    values = [
        float(v) for v in _NUMBER.findall(_list_body(_read(f"{case}/constant/polyMesh/points")))
    ]
    return list(zip(values[0::3], values[1::3], values[2::3], strict=False))


def read_faces(case: str) -> list[list[int]]:
    body = _list_body(_read(f"{case}/constant/polyMesh/faces"))
    return [[int(i) for i in inner.split()] for inner in re.findall(r"\d+\s*\(([^)]*)\)", body)]


def read_labels(case: str, name: str) -> list[int]:
    path = f"{case}/constant/polyMesh/{name}"
    if not os.path.isfile(path) and not os.path.isfile(path + ".gz"):
        return []
    return [int(v) for v in _list_body(_read(path)).split()]


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(_COMMENTS.sub(" ", text))


def parse_dict(toks: list[str], pos: int = 0) -> tuple[dict[str, object], int]:
    """A small OpenFOAM dictionary parser: `key value…;`, `key { … }`, lists `( … )`."""
    out: dict[str, object] = {}
    while pos < len(toks):
        tok = toks[pos]
        if tok == "}":
            return out, pos + 1
        if tok in (";", ")", "("):
            pos += 1
            continue
        key = tok.strip('"')
        pos += 1
        if pos < len(toks) and toks[pos] == "{":
            value, pos = parse_dict(toks, pos + 1)
            out[key] = value
            continue
        values: list[object] = []
        while pos < len(toks) and toks[pos] not in (";", "}"):
            if toks[pos] == "(":
                item, pos = _parse_list(toks, pos + 1)
                values.append(item)
            elif toks[pos] == "{":
                entry, pos = parse_dict(toks, pos + 1)
                values.append(entry)
            else:
                values.append(toks[pos])
                pos += 1
        if pos < len(toks) and toks[pos] == ";":
            pos += 1
        out[key] = values[0] if len(values) == 1 else values
    return out, pos


def _parse_list(toks: list[str], pos: int) -> tuple[list[object], int]:
    items: list[object] = []
    while pos < len(toks) and toks[pos] != ")":
        if toks[pos] == "(":
            item, pos = _parse_list(toks, pos + 1)
            items.append(item)
        elif toks[pos] == "{":
            entry, pos = parse_dict(toks, pos + 1)
            items.append(entry)
        else:
            items.append(toks[pos])
            pos += 1
    return items, pos + 1


def read_boundary(case: str) -> list[dict[str, object]]:
    """Patches in face order: name, type, start, size."""
    body = _strip_header(_read(f"{case}/constant/polyMesh/boundary"))
    toks = tokens(body)
    start = toks.index("(") if "(" in toks else 0
    items, _ = _parse_list(toks, start + 1)
    patches: list[dict[str, object]] = []
    name = None
    for item in items:
        if isinstance(item, str):
            name = item.strip('"')
        elif isinstance(item, dict) and name is not None:
            patches.append(
                {
                    "name": name,
                    "type": str(item.get("type", "")),
                    "start": int(str(item.get("startFace", 0))),
                    "size": int(str(item.get("nFaces", 0))),
                }
            )
    return patches


def _is_time(name: str) -> bool:
    try:
        return math.isfinite(float(name))
    except ValueError:
        return False


def latest_time(case: str) -> str | None:
    times = [n for n in os.listdir(case) if _is_time(n) and os.path.isdir(f"{case}/{n}")]
    return max(times, key=float) if times else None


def _field_values(block: str, n: int, width: int) -> list[float] | None:
    """Values of `uniform X` / `nonuniform List<…> N ( … )` text; vectors as magnitudes."""
    block = block.strip()
    if block.startswith("uniform"):
        nums = [float(v) for v in _NUMBER.findall(block[7:].split(";")[0])]
        if len(nums) < width:
            return None
        value = nums[0] if width == 1 else math.sqrt(sum(v * v for v in nums[:3]))
        return [value] * n
    if block.startswith("nonuniform"):
        open_at = block.find("(")
        if open_at < 0:
            return None
        head = block[:open_at]
        count = re.findall(r"(\d+)\s*$", head)
        size = int(count[0]) if count else None
        end = _matching(block, open_at)
        nums = [float(v) for v in _NUMBER.findall(block[open_at + 1 : end])]
        if width == 1:
            values = nums
        else:
            values = [
                math.sqrt(nums[i] ** 2 + nums[i + 1] ** 2 + nums[i + 2] ** 2)
                for i in range(0, len(nums) - 2, 3)
            ]
        if size is not None and len(values) != size:
            return None
        return values
    return None


def _matching(text: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(text)):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def _brace_block(text: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def read_field(
    case: str, time: str, name: str, n_cells: int, patches: list[dict[str, object]]
) -> dict[str, object] | None:
    """{"cells": [...], "patches": {name: values or None}, "dimensions": str, "vector": bool}."""
    path = f"{case}/{time}/{name}"
    if not os.path.isfile(path) and not os.path.isfile(path + ".gz"):
        return None
    text = _strip_header(_read(path))
    raw_header = _read(path)[:3000]
    cls = re.search(r"\bclass\s+(\w+)\s*;", raw_header)
    kind = cls.group(1) if cls else ""
    if kind not in ("volScalarField", "volVectorField"):
        return None
    width = 1 if kind == "volScalarField" else 3
    dims = re.search(r"dimensions\s*\[([^\]]*)\]", text)
    internal = re.search(r"internalField\s+", text)
    if internal is None:
        return None
    cells = _field_values(text[internal.end() :], n_cells, width)
    if cells is None or len(cells) != n_cells:
        return None
    boundary: dict[str, list[float] | None] = {}
    at = re.search(r"boundaryField\s*\{", text)
    if at:
        bf = text[at.end() - 1 : _brace_block(text, at.end() - 1) + 1]
        for patch in patches:
            pname = str(patch["name"])
            m = re.search(r"(?:^|[\s{])" + re.escape(pname) + r"\s*\{", bf)
            if not m:
                continue
            block = bf[m.end() - 1 : _brace_block(bf, m.end() - 1) + 1]
            v = re.search(r"[\s{;]value\s+", block)
            boundary[pname] = (
                _field_values(block[v.end() :], int(str(patch["size"])), width) if v else None
            )
    return {
        "cells": cells,
        "patches": boundary,
        "dimensions": " ".join(dims.group(1).split()) if dims else "",
        "vector": width == 3,
    }


# -- geometry ------------------------------------------------------------------------------


def _hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    pts = sorted(set(points))
    if len(pts) <= 2:
        return pts

    def cross(o: tuple[float, float], a: tuple[float, float], b: tuple[float, float]) -> float:
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: list[tuple[float, float]] = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    upper: list[tuple[float, float]] = []
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return lower[:-1] + upper[:-1]


class Cut:
    """The plane: normal along `axis`, at `level`; in-plane coordinates (u, v) = the other two
    axes in order."""

    def __init__(self, axis: int, level: float) -> None:
        self.axis = axis
        self.level = level
        self.u, self.v = [a for a in (0, 1, 2) if a != axis]

    def face_crossings(
        self, face: list[int], points: list[tuple[float, float, float]]
    ) -> list[tuple[float, float]]:
        a, lvl = self.axis, self.level
        out: list[tuple[float, float]] = []
        n = len(face)
        for i in range(n):
            p, q = points[face[i]], points[face[(i + 1) % n]]
            dp, dq = p[a] - lvl, q[a] - lvl
            if (dp < 0) != (dq < 0):
                t = dp / (dp - dq)
                out.append(
                    (
                        p[self.u] + t * (q[self.u] - p[self.u]),
                        p[self.v] + t * (q[self.v] - p[self.v]),
                    )
                )
        return out


def choose_cut(
    points: list[tuple[float, float, float]], patches: list[dict[str, object]]
) -> tuple[Cut, bool]:
    """(the plane, whether the case is 2-D): a 2-D case is one cell thick along an axis (two
    distinct coordinates) and has `empty` patches."""
    lo = [min(p[a] for p in points) for a in range(3)]
    hi = [max(p[a] for p in points) for a in range(3)]
    has_empty = any(p["type"] == "empty" for p in patches)
    if has_empty:
        for axis in (2, 1, 0):
            span = hi[axis] - lo[axis]
            tol = 1e-6 * max(max(hi[a] - lo[a] for a in range(3)), 1e-30)
            if span > 0 and all(
                abs(p[axis] - lo[axis]) <= tol or abs(p[axis] - hi[axis]) <= tol for p in points
            ):
                return Cut(axis, (lo[axis] + hi[axis]) / 2), True
    span = hi[2] - lo[2]
    return Cut(2, (lo[2] + hi[2]) / 2 + 1e-7 * span), False


def cell_polygons(
    cut: Cut,
    points: list[tuple[float, float, float]],
    faces: list[list[int]],
    owner: list[int],
    neighbour: list[int],
) -> dict[int, list[tuple[float, float]]]:
    crossings: dict[int, list[tuple[float, float]]] = {}
    a, lvl = cut.axis, cut.level
    for f, face in enumerate(faces):
        below = above = False
        for i in face:
            if points[i][a] < lvl:
                below = True
            else:
                above = True
        if not (below and above):
            continue
        pts = cut.face_crossings(face, points)
        crossings.setdefault(owner[f], []).extend(pts)
        if f < len(neighbour):
            crossings.setdefault(neighbour[f], []).extend(pts)
    return {cell: hull for cell, pts in crossings.items() if len(hull := _hull(pts)) >= 3}


def grid_for(bounds: tuple[float, float, float, float], name: str) -> dict[str, object]:
    x0, x1, y0, y1 = bounds
    w, h = max(x1 - x0, 1e-30), max(y1 - y0, 1e-30)
    nx = max(2, min(GRID_POINTS // 2, round(math.sqrt(GRID_POINTS * w / h))))
    ny = max(2, min(GRID_POINTS // 2, GRID_POINTS // nx))
    return {
        "name": name,
        "x0": x0,
        "y0": y0,
        "dx": w / (nx - 1),
        "dy": h / (ny - 1),
        "nx": nx,
        "ny": ny,
    }


def rasterize(grid: dict[str, object], polygons: dict[int, list[tuple[float, float]]]) -> list[int]:
    """The cell under each grid point (row-major, y rows), -1 where there is none."""
    x0, y0 = float(grid["x0"]), float(grid["y0"])  # type: ignore[arg-type]
    dx, dy = float(grid["dx"]), float(grid["dy"])  # type: ignore[arg-type]
    nx, ny = int(grid["nx"]), int(grid["ny"])  # type: ignore[call-overload]
    index = [-1] * (nx * ny)
    for cell, poly in polygons.items():
        xs = [p[0] for p in poly]
        ys = [p[1] for p in poly]
        i0, i1 = (
            max(0, math.ceil((min(xs) - x0) / dx)),
            min(nx - 1, math.floor((max(xs) - x0) / dx)),
        )
        j0, j1 = (
            max(0, math.ceil((min(ys) - y0) / dy)),
            min(ny - 1, math.floor((max(ys) - y0) / dy)),
        )
        if i0 > i1 or j0 > j1:
            continue
        edges = list(zip(poly, poly[1:] + poly[:1], strict=False))
        for j in range(j0, j1 + 1):
            y = y0 + j * dy
            for i in range(i0, i1 + 1):
                x = x0 + i * dx
                # convex polygon, counter-clockwise (the hull): inside when left of every edge
                if all(
                    (b[0] - a[0]) * (y - a[1]) - (b[1] - a[1]) * (x - a[0]) >= 0 for a, b in edges
                ):
                    index[j * nx + i] = cell
    return index


def _round(value: float) -> float | None:
    if not math.isfinite(value):
        return None
    return float(f"{value:.4g}")


# -- the function objects ------------------------------------------------------------------


def force_objects(case: str) -> list[dict[str, object]]:
    """The forces/forceCoeffs entries of system/controlDict's `functions`."""
    try:
        text = _strip_header(_read(f"{case}/system/controlDict"))
    except (OSError, FieldsError):
        return []
    control, _ = parse_dict(tokens(text))
    functions = control.get("functions")
    found = []
    if isinstance(functions, dict):
        for name, entry in functions.items():
            if isinstance(entry, dict) and str(entry.get("type", "")) in ("forces", "forceCoeffs"):
                found.append({"name": name, **entry})
    found.sort(key=lambda e: e.get("type") != "forceCoeffs")  # forceCoeffs first: it has refs
    return found


def _number(value: object) -> float | None:
    try:
        number = float(str(value))
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _patch_names(selector: object, patches: list[dict[str, object]]) -> list[str]:
    words = selector if isinstance(selector, list) else [selector]
    names: list[str] = []
    for word in words:
        if not isinstance(word, str):
            continue
        for patch in patches:
            pname = str(patch["name"])
            quoted = word.startswith('"')
            pattern = word.strip('"')
            try:
                hit = re.fullmatch(pattern, pname) if quoted else pattern == pname
            except re.error:
                hit = False
            if hit and pname not in names:
                names.append(pname)
    return names


def surface_cp(
    *,
    case: str,
    cut: Cut,
    two_d: bool,
    points: list[tuple[float, float, float]],
    faces: list[list[int]],
    owner: list[int],
    patches: list[dict[str, object]],
    p: dict[str, object] | None,
    notes: list[str],
) -> tuple[dict[str, object] | None, list[str]]:
    objects = force_objects(case)
    if not objects:
        notes.append("no forces/forceCoeffs function object in system/controlDict: no Cp")
        return None, []
    fo = objects[0]
    names = _patch_names(fo.get("patches"), patches)
    if not names:
        notes.append(f"the patches of {fo['name']} were not found in the mesh: no Cp")
        return None, []
    if p is None:
        notes.append("no p field at the latest time: no Cp")
        return None, names
    u_inf = _number(fo.get("magUInf"))
    if u_inf is None or u_inf == 0:
        notes.append(f"{fo['name']} has no magUInf: no Cp (it needs the free-stream speed)")
        return None, names
    kinematic = str(p["dimensions"]).split()[:3] == ["0", "2", "-2"]
    rho_inf = _number(fo.get("rhoInf")) or 1.0
    p_ref = _number(fo.get("pRef")) or 0.0
    q = 0.5 * u_inf * u_inf * (1.0 if kinematic else rho_inf)
    cells = p["cells"]
    rows = []
    by_patch = {str(pt["name"]): pt for pt in patches}
    boundary = p["patches"]
    for pname in names:
        patch = by_patch[pname]
        start, size = int(str(patch["start"])), int(str(patch["size"]))
        values = boundary.get(pname) if isinstance(boundary, dict) else None
        for k in range(size):
            f = start + k
            face = faces[f]
            ring = [points[i] for i in face]
            centre = [sum(c[a] for c in ring) / len(ring) for a in range(3)]
            if not two_d:  # a 3-D body: the faces the plane crosses
                if not cut.face_crossings(face, points):
                    continue
            normal = [0.0, 0.0, 0.0]
            for i in range(len(ring)):
                c0, c1 = ring[i], ring[(i + 1) % len(ring)]
                normal[0] += (c0[1] - c1[1]) * (c0[2] + c1[2])
                normal[1] += (c0[2] - c1[2]) * (c0[0] + c1[0])
                normal[2] += (c0[0] - c1[0]) * (c0[1] + c1[1])
            value = values[k] if values else cells[owner[f]]  # type: ignore[index]
            rows.append((centre[cut.u], centre[cut.v], normal[cut.v], value, pname))
    if not rows:
        return None, names
    xs = [r[0] for r in rows]
    x_min, chord = min(xs), (max(xs) - min(xs)) or 1.0
    rows.sort(key=lambda r: r[0])
    step = max(1, math.ceil(len(rows) / MAX_CP_POINTS))
    rows = rows[::step]
    reference = {
        "function_object": fo["name"],
        "magUInf": u_inf,
        "rhoInf": None if kinematic else rho_inf,
        "pRef": p_ref,
        "lRef": _number(fo.get("lRef")),
        "chord": chord,
        "kinematic_pressure": kinematic,
        "text": (
            f"Cp = (p - {p_ref:g}) / (0.5{'' if kinematic else f' * {rho_inf:g}'} * {u_inf:g}^2)"
            f" from {fo['name']}'s magUInf{'' if kinematic else ' and rhoInf'}"
            f"{' (p is kinematic)' if kinematic else ''}; x/c with c = {chord:.4g}"
            f", the extent of {', '.join(names)} along the plane's first axis"
        ),
    }
    return {
        "patches": names,
        "reference": reference,
        "x_over_c": [_round((r[0] - x_min) / chord) for r in rows],
        "x": [_round(r[0]) for r in rows],
        "cp": [_round((r[3] - p_ref) / q) for r in rows],
        "side": ["lower" if r[2] > 0 else "upper" for r in rows],
        "patch": [r[4] for r in rows],
    }, names


# -- the artifact --------------------------------------------------------------------------


def outline(
    cut: Cut,
    points: list[tuple[float, float, float]],
    faces: list[list[int]],
    patches: list[dict[str, object]],
    names: list[str],
) -> dict[str, list[float | None]]:
    xs: list[float | None] = []
    ys: list[float | None] = []
    count = 0
    for patch in patches:
        if patch["type"] != "wall" and patch["name"] not in names:
            continue
        start, size = int(str(patch["start"])), int(str(patch["size"]))
        for f in range(start, start + size):
            crossing = cut.face_crossings(faces[f], points)
            if len(crossing) >= 2 and count < MAX_OUTLINE_SEGMENTS:
                (a, b) = crossing[0], crossing[1]
                xs += [_round(a[0]), _round(b[0]), None]
                ys += [_round(a[1]), _round(b[1]), None]
                count += 1
    return {"x": xs, "y": ys}


def build(case: str, extra_fields: list[str]) -> dict[str, object]:
    notes: list[str] = []
    time = latest_time(case)
    if time is None:
        raise FieldsError("no time directory in the case")
    mesh = f"{case}/constant/polyMesh"
    size = sum(
        os.path.getsize(f"{mesh}/{name}")
        for name in ("points", "faces", "owner", "neighbour")
        if os.path.isfile(f"{mesh}/{name}")
    )
    if size > MAX_MESH_BYTES:
        raise FieldsError(f"the mesh is too large for the built-in converter ({size >> 20} MB)")
    points = read_points(case)
    faces = read_faces(case)
    owner = read_labels(case, "owner")
    neighbour = read_labels(case, "neighbour")
    patches = read_boundary(case)
    if not points or not faces or not owner:
        raise FieldsError("the mesh is empty")
    n_cells = max(max(owner), max(neighbour) if neighbour else 0) + 1
    cut, two_d = choose_cut(points, patches)
    polygons = cell_polygons(cut, points, faces, owner, neighbour)
    if not polygons:
        raise FieldsError("the cutting plane crosses no cell")
    wanted = list(DEFAULT_FIELDS) + [f for f in extra_fields if f not in DEFAULT_FIELDS]
    fields: dict[str, dict[str, object]] = {}
    for name in wanted[: len(DEFAULT_FIELDS) + MAX_EXTRA_FIELDS]:
        try:
            field = read_field(case, time, name, n_cells, patches)
        except FieldsError as exc:
            notes.append(str(exc))
            continue
        if field is None:
            notes.append(f"{name}: no readable volume field at time {time}")
            continue
        fields[name] = field
    cp, force_patches = surface_cp(
        case=case,
        cut=cut,
        two_d=two_d,
        points=points,
        faces=faces,
        owner=owner,
        patches=patches,
        p=fields.get("p"),
        notes=notes,
    )
    xs = [p[0] for poly in polygons.values() for p in poly]
    ys = [p[1] for poly in polygons.values() for p in poly]
    domain = (min(xs), max(xs), min(ys), max(ys))
    regions = [grid_for(domain, "domain")]
    if force_patches:
        body = outline(cut, points, faces, [p for p in patches if p["name"] in force_patches], [])
        bx = [v for v in body["x"] if v is not None]
        by = [v for v in body["y"] if v is not None]
        if bx:
            extent = max(max(bx) - min(bx), max(by) - min(by))
            near = (
                max(domain[0], min(bx) - 0.5 * extent),
                min(domain[1], max(bx) + 1.0 * extent),
                max(domain[2], min(by) - 0.5 * extent),
                min(domain[3], max(by) + 0.5 * extent),
            )
            regions.append(grid_for(near, "body"))
    out_fields: dict[str, object] = {}
    indexes = [rasterize(region, polygons) for region in regions]
    for name, field in fields.items():
        cells = field["cells"]
        label = f"|{name}|" if field["vector"] else name
        key = f"mag({name})" if field["vector"] else name
        per_region = {}
        finite = [c for c in cells if math.isfinite(c)]  # type: ignore[attr-defined]
        for region, index in zip(regions, indexes, strict=True):
            per_region[str(region["name"])] = [
                None if i < 0 else _round(cells[i])  # type: ignore[index]
                for i in index
            ]
        out_fields[key] = {
            "label": label,
            "dimensions": field["dimensions"],
            "min": _round(min(finite)) if finite else None,
            "max": _round(max(finite)) if finite else None,
            "values": per_region,
        }
    axis_names = "xyz"
    return {
        "version": VERSION,
        "time": time,
        "kind": "2d" if two_d else "plane",
        "plane": {
            "normal": axis_names[cut.axis],
            "at": cut.level,
            "axes": [axis_names[cut.u], axis_names[cut.v]],
        },
        "cells": n_cells,
        "regions": [
            {k: (_round(v) if isinstance(v, float) else v) for k, v in r.items()} for r in regions
        ],
        "fields": out_fields,
        "outline": outline(cut, points, faces, patches, force_patches),
        "cp": cp,
        "notes": notes,
    }


def main(argv: list[str]) -> int:
    extra: list[str] = []
    out = ARTIFACT
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--fields" and args:
            extra = [f for f in args.pop(0).split(",") if re.fullmatch(r"[A-Za-z][\w.:]*", f)]
        elif arg == "--out" and args:
            out = args.pop(0)
    try:
        artifact = build(".", extra)
    except (FieldsError, OSError, ValueError, IndexError) as exc:
        print(f"fields: cannot post-process this case: {exc}", file=sys.stderr)
        return 1
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(artifact, fh, separators=(",", ":"), allow_nan=False)
    fields = artifact["fields"]
    notes = artifact["notes"]
    sizes = ", ".join(str(k) for k in fields) if isinstance(fields, dict) else ""
    print(f"fields: wrote {out} ({artifact['kind']}, time {artifact['time']}: {sizes})")
    for note in notes if isinstance(notes, list) else []:
        print(f"fields: note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
