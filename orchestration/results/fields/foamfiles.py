"""Reading a case's OpenFOAM files for post-processing: ASCII polyMesh, boundary, time
directories, fields (uniform and nonuniform, gzipped or not). Stdlib only."""

from __future__ import annotations

import gzip
import math
import os
import re

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_TOKEN = re.compile(r'"[^"]*"|[{}();]|[^\s{}();"]+')


class FieldsError(Exception):
    """The case cannot be post-processed (binary format, no mesh, no time, …)."""


def read_text(path: str) -> str:
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


def strip_header(text: str) -> str:
    text = _COMMENTS.sub(" ", text)
    match = re.search(r"FoamFile\s*\{[^}]*\}", text)
    return text[match.end() :] if match else text


def list_body(text: str) -> str:
    """The text inside the outermost list `N ( … )` of a mesh file."""
    body = strip_header(text)
    match = re.search(r"(\d+)\s*\(", body)
    if not match:
        raise FieldsError("no list found")
    end = body.rfind(")")
    return body[match.end() : end]


def read_points(case: str) -> list[tuple[float, float, float]]:
    values = [
        float(v) for v in _NUMBER.findall(list_body(read_text(f"{case}/constant/polyMesh/points")))
    ]
    return list(zip(values[0::3], values[1::3], values[2::3], strict=False))


def read_faces(case: str) -> list[list[int]]:
    body = list_body(read_text(f"{case}/constant/polyMesh/faces"))
    return [[int(i) for i in inner.split()] for inner in re.findall(r"\d+\s*\(([^)]*)\)", body)]


def read_labels(case: str, name: str) -> list[int]:
    path = f"{case}/constant/polyMesh/{name}"
    if not os.path.isfile(path) and not os.path.isfile(path + ".gz"):
        return []
    return [int(v) for v in list_body(read_text(path)).split()]


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
                item, pos = parse_list(toks, pos + 1)
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


def parse_list(toks: list[str], pos: int) -> tuple[list[object], int]:
    items: list[object] = []
    while pos < len(toks) and toks[pos] != ")":
        if toks[pos] == "(":
            item, pos = parse_list(toks, pos + 1)
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
    body = strip_header(read_text(f"{case}/constant/polyMesh/boundary"))
    toks = tokens(body)
    start = toks.index("(") if "(" in toks else 0
    items, _ = parse_list(toks, start + 1)
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


def is_time(name: str) -> bool:
    try:
        return math.isfinite(float(name))
    except ValueError:
        return False


def latest_time(case: str) -> str | None:
    times = [n for n in os.listdir(case) if is_time(n) and os.path.isdir(f"{case}/{n}")]
    return max(times, key=float) if times else None


def field_values(block: str, n: int, width: int) -> list[float] | None:
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
        end = matching(block, open_at)
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


def matching(text: str, open_at: int) -> int:
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


def brace_block(text: str, open_at: int) -> int:
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
    text = strip_header(read_text(path))
    raw_header = read_text(path)[:3000]
    cls = re.search(r"\bclass\s+(\w+)\s*;", raw_header)
    kind = cls.group(1) if cls else ""
    if kind not in ("volScalarField", "volVectorField"):
        return None
    width = 1 if kind == "volScalarField" else 3
    dims = re.search(r"dimensions\s*\[([^\]]*)\]", text)
    internal = re.search(r"internalField\s+", text)
    if internal is None:
        return None
    cells = field_values(text[internal.end() :], n_cells, width)
    if cells is None or len(cells) != n_cells:
        return None
    boundary: dict[str, list[float] | None] = {}
    at = re.search(r"boundaryField\s*\{", text)
    if at:
        bf = text[at.end() - 1 : brace_block(text, at.end() - 1) + 1]
        for patch in patches:
            pname = str(patch["name"])
            m = re.search(r"(?:^|[\s{])" + re.escape(pname) + r"\s*\{", bf)
            if not m:
                continue
            block = bf[m.end() - 1 : brace_block(bf, m.end() - 1) + 1]
            v = re.search(r"[\s{;]value\s+", block)
            boundary[pname] = (
                field_values(block[v.end() :], int(str(patch["size"])), width) if v else None
            )
    return {
        "cells": cells,
        "patches": boundary,
        "dimensions": " ".join(dims.group(1).split()) if dims else "",
        "vector": width == 3,
    }
