"""The pressure coefficient along the patches of a case's forces/forceCoeffs function object.
Stdlib only."""

from __future__ import annotations

import math
import re

from orchestration.results.fields import MAX_CP_POINTS
from orchestration.results.fields.foamfiles import (
    FieldsError,
    parse_dict,
    read_text,
    strip_header,
    tokens,
)
from orchestration.results.fields.plane import Cut, rounded


def force_objects(case: str) -> list[dict[str, object]]:
    """The forces/forceCoeffs entries of system/controlDict's `functions`."""
    try:
        text = strip_header(read_text(f"{case}/system/controlDict"))
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


def as_number(value: object) -> float | None:
    try:
        number = float(str(value))
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def patch_names(selector: object, patches: list[dict[str, object]]) -> list[str]:
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
    names = patch_names(fo.get("patches"), patches)
    if not names:
        notes.append(f"the patches of {fo['name']} were not found in the mesh: no Cp")
        return None, []
    if p is None:
        notes.append("no p field at the latest time: no Cp")
        return None, names
    u_inf = as_number(fo.get("magUInf"))
    if u_inf is None or u_inf == 0:
        notes.append(f"{fo['name']} has no magUInf: no Cp (it needs the free-stream speed)")
        return None, names
    kinematic = str(p["dimensions"]).split()[:3] == ["0", "2", "-2"]
    rho_inf = as_number(fo.get("rhoInf")) or 1.0
    p_ref = as_number(fo.get("pRef")) or 0.0
    q = 0.5 * u_inf * u_inf * (1.0 if kinematic else rho_inf)
    cells = p["cells"]
    rows = []
    edge = [math.inf, -math.inf]  # the patches' extent along the plane's first axis
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
            for corner in ring:
                edge[0], edge[1] = min(edge[0], corner[cut.u]), max(edge[1], corner[cut.u])
            value = values[k] if values else cells[owner[f]]  # type: ignore[index]
            rows.append((centre[cut.u], centre[cut.v], normal[cut.v], value, pname))
    if not rows:
        return None, names
    # x/c from the leading edge (the patches' first point, not a face centre), over the case's
    # own reference length (lRef, what its force coefficients use) where it gives one, else
    # over the patches' extent
    x_min = edge[0]
    l_ref = as_number(fo.get("lRef"))
    chord = l_ref if l_ref is not None and l_ref > 0 else (edge[1] - edge[0]) or 1.0
    chord_from = (
        f"the lRef of {fo['name']}"
        if chord == l_ref
        else f"the extent of {', '.join(names)} along the plane's first axis"
    )
    rows.sort(key=lambda r: r[0])
    step = max(1, math.ceil(len(rows) / MAX_CP_POINTS))
    rows = rows[::step]
    reference = {
        "function_object": fo["name"],
        "magUInf": u_inf,
        "rhoInf": None if kinematic else rho_inf,
        "pRef": p_ref,
        "lRef": l_ref,
        "chord": chord,
        "kinematic_pressure": kinematic,
        "text": (
            f"Cp = (p - {p_ref:g}) / (0.5{'' if kinematic else f' * {rho_inf:g}'} * {u_inf:g}^2)"
            f" from {fo['name']}'s magUInf{'' if kinematic else ' and rhoInf'}"
            f"{' (p is kinematic)' if kinematic else ''}; x/c with c = {chord:.4g}, {chord_from}"
        ),
    }
    return {
        "patches": names,
        "reference": reference,
        "x_over_c": [rounded((r[0] - x_min) / chord) for r in rows],
        "x": [rounded(r[0]) for r in rows],
        "cp": [rounded((r[3] - p_ref) / q) for r in rows],
        "side": ["lower" if r[2] > 0 else "upper" for r in rows],
        "patch": [r[4] for r in rows],
    }, names
