"""The flow-field artifact of a finished case, and the command line that writes it. Stdlib only."""

from __future__ import annotations

import json
import math
import os
import re
import sys

from orchestration.results.fields import (
    ARTIFACT,
    DEFAULT_FIELDS,
    MAX_EXTRA_FIELDS,
    MAX_MESH_BYTES,
    VERSION,
)
from orchestration.results.fields.foamfiles import (
    FieldsError,
    latest_time,
    read_boundary,
    read_faces,
    read_field,
    read_labels,
    read_points,
)
from orchestration.results.fields.plane import (
    cell_polygons,
    choose_cut,
    grid_for,
    outline,
    rasterize,
    rounded,
)
from orchestration.results.fields.surface import surface_cp


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
                None if i < 0 else rounded(cells[i])  # type: ignore[index]
                for i in index
            ]
        out_fields[key] = {
            "label": label,
            "dimensions": field["dimensions"],
            "min": rounded(min(finite)) if finite else None,
            "max": rounded(max(finite)) if finite else None,
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
            {k: (rounded(v) if isinstance(v, float) else v) for k, v in r.items()} for r in regions
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
    if out == "-":  # to standard output (the portal's file), what it says to standard error
        json.dump(artifact, sys.stdout, separators=(",", ":"), allow_nan=False)
        sys.stdout.flush()
        say = sys.stderr
    else:
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(artifact, fh, separators=(",", ":"), allow_nan=False)
        say = sys.stdout
    fields = artifact["fields"]
    notes = artifact["notes"]
    sizes = ", ".join(str(k) for k in fields) if isinstance(fields, dict) else ""
    where = "standard output" if out == "-" else out
    print(f"fields: wrote {where} ({artifact['kind']}, time {artifact['time']}: {sizes})", file=say)
    for note in notes if isinstance(notes, list) else []:
        print(f"fields: note: {note}", file=say)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
