"""The flow-field artifact as the portal reads it: extracted from the start of a run's result
archive, or made by the portal itself (backend/runs/flow_fields.py), checked before anything of it is served (it comes from inside a
tenant's case: a malformed one reads as "no flow fields", never as an error), and trimmed to
what the run page shows. Plain Python, no Django."""

from __future__ import annotations

import functools
import json
import math
import tarfile
from pathlib import Path
from typing import Any

from orchestration.results.fields import ARTIFACT

MAX_ARTIFACT_BYTES = 32 * 1024 * 1024
MAX_MEMBERS_SCANNED = 50  # the artifact leads the archive; never read through a whole one


def extracted_from_archive(archive: Path) -> Path | None:
    """Where the artifact extracted from a run's result archive is (extracted once, beside
    the archive: in the portal's own folder); None when the archive has none."""
    extracted = archive.with_name(archive.name.removesuffix(".tar.gz") + ".fields.json")
    if extracted.is_file() and extracted.stat().st_mtime >= archive.stat().st_mtime:
        return extracted
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            for count, member in enumerate(tar):
                if count >= MAX_MEMBERS_SCANNED:
                    return None
                if member.name != ARTIFACT:
                    continue
                if not member.isfile() or member.size > MAX_ARTIFACT_BYTES:
                    return None
                source = tar.extractfile(member)
                if source is None:
                    return None
                part = extracted.with_suffix(".part")
                part.write_bytes(source.read())
                part.replace(extracted)
                return extracted
    except (OSError, tarfile.TarError, EOFError):
        return None
    return None


@functools.lru_cache(maxsize=16)
def load_artifact(path: str, mtime: float, size: int) -> dict[str, Any] | None:
    """The checked artifact at `path` (None: too large, unreadable, malformed); `mtime`
    and `size` key the cache."""
    if size > MAX_ARTIFACT_BYTES:
        return None
    try:
        data = json.loads(Path(path).read_bytes())
    except (OSError, ValueError):
        return None
    return data if is_valid(data) else None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def is_valid(data: Any) -> bool:
    """The artifact's shape (version 1): every region a grid whose value lists fit it."""
    if not isinstance(data, dict) or data.get("version") != 1:
        return False
    regions = data.get("regions")
    fields = data.get("fields")
    if not isinstance(regions, list) or not regions or not isinstance(fields, dict):
        return False
    sizes = {}
    for region in regions:
        if not isinstance(region, dict) or not isinstance(region.get("name"), str):
            return False
        nx, ny = region.get("nx"), region.get("ny")
        if not all(_number(region.get(k)) for k in ("x0", "y0", "dx", "dy")):
            return False
        if not (isinstance(nx, int) and isinstance(ny, int) and 2 <= nx and 2 <= ny):
            return False
        if nx * ny > 100_000:
            return False
        sizes[region["name"]] = nx * ny
    for name, field in fields.items():
        if not isinstance(name, str) or not isinstance(field, dict):
            return False
        values = field.get("values")
        if not isinstance(values, dict) or set(values) != set(sizes):
            return False
        for region_name, column in values.items():
            if not isinstance(column, list) or len(column) != sizes[region_name]:
                return False
            if not all(v is None or _number(v) for v in column):
                return False
    outline = data.get("outline")
    if outline is not None and not (
        isinstance(outline, dict)
        and isinstance(outline.get("x"), list)
        and isinstance(outline.get("y"), list)
    ):
        return False
    cp = data.get("cp")
    if cp is not None:
        if not isinstance(cp, dict) or not isinstance(cp.get("reference"), dict):
            return False
        columns = [cp.get(k) for k in ("x_over_c", "cp", "side", "patch", "x")]
        if not all(isinstance(c, list) for c in columns):
            return False
        if len({len(c) for c in columns if isinstance(c, list)}) != 1:
            return False
    return True


def _text(value: Any, limit: int = 200) -> str:
    return str(value)[:limit] if isinstance(value, str | int | float) else ""


def fields_index(
    *,
    run_id: str,
    artifact: dict[str, Any] | None,
    preparing: bool = False,
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """What the run page lists: fields, regions, the plane, Cp (small), notes; without an
    artifact, whether it is being made (`preparing`) and why there is none (`notes`)."""
    if artifact is None:
        return {
            "run": run_id,
            "available": False,
            "preparing": preparing,
            "fields": [],
            "regions": [],
            "notes": [_text(n, 2000) for n in notes or []],
        }
    raw_plane = artifact.get("plane")
    plane: dict[str, Any] = raw_plane if isinstance(raw_plane, dict) else {}
    return {
        "run": run_id,
        "available": True,
        "preparing": False,
        "time": _text(artifact.get("time")),
        "kind": "2d" if artifact.get("kind") == "2d" else "plane",
        "plane": {
            "normal": _text(plane.get("normal"), 1),
            "at": plane.get("at") if _number(plane.get("at")) else None,
            "axes": [_text(a, 1) for a in plane.get("axes") or []][:2],
        },
        "fields": [
            {
                "name": name,
                "label": _text(field.get("label")) or name,
                "dimensions": _text(field.get("dimensions")),
                "min": field.get("min") if _number(field.get("min")) else None,
                "max": field.get("max") if _number(field.get("max")) else None,
            }
            for name, field in artifact["fields"].items()
        ],
        "regions": [_region(r) for r in artifact["regions"]],
        "cp": _cp(artifact.get("cp")),
        "notes": [_text(n, 500) for n in artifact.get("notes") or []][:20],
    }


def _region(region: dict[str, Any]) -> dict[str, Any]:
    return {k: region[k] for k in ("name", "x0", "y0", "dx", "dy", "nx", "ny")}


def _cp(cp: Any) -> dict[str, Any] | None:
    if not isinstance(cp, dict):
        return None
    ref = cp["reference"]
    return {
        "patches": [_text(p) for p in cp.get("patches") or []],
        "reference": {
            "text": _text(ref.get("text"), 1000),
            **{
                k: ref.get(k) if _number(ref.get(k)) else None
                for k in ("magUInf", "rhoInf", "pRef", "lRef", "chord")
            },
        },
        "x_over_c": [v if _number(v) else None for v in cp["x_over_c"]],
        "cp": [v if _number(v) else None for v in cp["cp"]],
        "side": ["upper" if s == "upper" else "lower" for s in cp["side"]],
        "patch": [_text(p) for p in cp["patch"]],
    }


def field_data(*, artifact: dict[str, Any], field: str, region: str) -> dict[str, Any]:
    """One field on one region's grid, with the outline to draw over it. The caller has
    checked that both exist."""
    grid = next(r for r in artifact["regions"] if r["name"] == region)
    data = artifact["fields"][field]
    outline = artifact.get("outline") or {"x": [], "y": []}
    return {
        "field": field,
        "label": _text(data.get("label")) or field,
        "dimensions": _text(data.get("dimensions")),
        "region": _region(grid),
        "values": data["values"][region],
        "min": data.get("min") if _number(data.get("min")) else None,
        "max": data.get("max") if _number(data.get("max")) else None,
        "outline": {
            "x": [v if _number(v) else None for v in outline["x"]],
            "y": [v if _number(v) else None for v in outline["y"]],
        },
    }
