"""The cutting plane: which cells it crosses, their polygons on a regular grid, and the
outline of the walls on it. Stdlib only."""

from __future__ import annotations

import math

from orchestration.results.fields import GRID_POINTS, MAX_OUTLINE_SEGMENTS

# -- geometry ------------------------------------------------------------------------------


def convex_hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
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
    return {cell: hull for cell, pts in crossings.items() if len(hull := convex_hull(pts)) >= 3}


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


def rounded(value: float) -> float | None:
    if not math.isfinite(value):
        return None
    return float(f"{value:.4g}")


# -- the function objects ------------------------------------------------------------------


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
                xs += [rounded(a[0]), rounded(b[0]), None]
                ys += [rounded(a[1]), rounded(b[1]), None]
                count += 1
    return {"x": xs, "y": ys}
