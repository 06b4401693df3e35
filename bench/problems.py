"""Test problems whose answers are known, standing in for a solver in the analysis benchmark
and the tests: each maps a run's parameters to its objectives, as a tiny analytic solver would.

- Ishigami (Sobol indices known): sin x1 + a sin² x2 + b x3⁴ sin x1 over [-π, π]³.
- ZDT1 (Zitzler, Deb & Thiele 2000; two objectives, both minimised, front f2 = 1 − √f1 where
  x2 … xn = 0) over [0, 1]ⁿ.
- DTLZ2 (Deb, Thiele, Laumanns & Zitzler 2002; three objectives, minimised, the front the unit
  sphere's positive octant where x3 … xn = 0.5) over [0, 1]ⁿ.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

# the Ishigami function's true indices (a = 7, b = 0.1)
ISHIGAMI_FIRST = {"x1": 0.3139, "x2": 0.4424, "x3": 0.0}
ISHIGAMI_TOTAL = {"x1": 0.5576, "x2": 0.4424, "x3": 0.2437}


def ishigami(points: list[dict[str, float]], a: float = 7.0, b: float = 0.1) -> list[float]:
    """sin x1 + a sin² x2 + b x3⁴ sin x1 over [-π, π]³."""
    return [
        math.sin(p["x1"]) + a * math.sin(p["x2"]) ** 2 + b * p["x3"] ** 4 * math.sin(p["x1"])
        for p in points
    ]


def _xs(p: Mapping[str, float]) -> list[float]:
    return [float(p[f"x{i}"]) for i in range(1, len(p) + 1)]


def zdt1(p: Mapping[str, float]) -> dict[str, float]:
    """ZDT1's two objectives at x = (x1 … xn)."""
    x = _xs(p)
    g = 1.0 + 9.0 * sum(x[1:]) / (len(x) - 1)
    return {"f1": x[0], "f2": g * (1.0 - math.sqrt(x[0] / g))}


def zdt1_front(n: int = 20001) -> np.ndarray:
    """n points of ZDT1's true front (f1, f2)."""
    f1 = np.linspace(0.0, 1.0, n)
    front: np.ndarray = np.column_stack([f1, 1.0 - np.sqrt(f1)])
    return front


def dtlz2(p: Mapping[str, float]) -> dict[str, float]:
    """DTLZ2's three objectives at x = (x1 … xn)."""
    x = _xs(p)
    g = sum((v - 0.5) ** 2 for v in x[2:])
    a, b = x[0] * math.pi / 2, x[1] * math.pi / 2
    return {
        "f1": (1 + g) * math.cos(a) * math.cos(b),
        "f2": (1 + g) * math.cos(a) * math.sin(b),
        "f3": (1 + g) * math.sin(a),
    }


def dtlz2_front(n: int = 200) -> np.ndarray:
    """n × n points of DTLZ2's true front (the unit sphere's positive octant)."""
    a, b = np.meshgrid(np.linspace(0, math.pi / 2, n), np.linspace(0, math.pi / 2, n))
    front: np.ndarray = np.column_stack(
        [(np.cos(a) * np.cos(b)).ravel(), (np.cos(a) * np.sin(b)).ravel(), np.sin(a).ravel()]
    )
    return front
