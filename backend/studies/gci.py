"""Mesh independence: the grid convergence index of a study's objectives over a refinement
parameter, following Celik et al. (2008), "Procedure for estimation and reporting of
uncertainty due to discretization in CFD applications", J. Fluids Eng. 130(7), 078001.

Three levels of the refinement parameter (the three finest when a study has more), each a
representative cell size h (h1 < h2 < h3, fine to coarse) and an objective's value φ there:

- r21 = h2/h1, r32 = h3/h2; ε21 = φ2 − φ1, ε32 = φ3 − φ2, s = sign(ε32/ε21);
- the observed order p solves p = |ln|ε32/ε21| + q(p)| / ln r21 with
  q(p) = ln((r21^p − s)/(r32^p − s)), by fixed-point iteration from q = 0;
- the extrapolated value φ21_ext = (r21^p φ1 − φ2)/(r21^p − 1);
- the approximate and extrapolated relative errors e21_a = |(φ1 − φ2)/φ1|,
  e21_ext = |(φ21_ext − φ1)/φ21_ext|, and the fine-grid index GCI21 = 1.25 e21_a/(r21^p − 1);
- the asymptotic-range check: GCI32 / (r21^p GCI21) near 1 (GCI32 = 1.25 e32_a/(r32^p − 1)).

s < 0 is oscillatory convergence, which the procedure flags (its p is still computed).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from core.exceptions import ApplicationError
from studies.choices import RunState
from studies.models import Study

SAFETY = 1.25  # Celik et al.'s factor of safety for three or more grids
ASYMPTOTIC = 0.1  # |GCI32 / (r21^p GCI21) − 1| within this: in the asymptotic range
KINDS = ("per_direction", "total", "size")  # what the refinement parameter's value is


@dataclass(frozen=True)
class Gci:
    phi: tuple[float, float, float]  # fine, medium, coarse
    h: tuple[float, float, float]
    r21: float
    r32: float
    p: float
    phi_ext: float
    e_a: float
    e_ext: float
    gci_fine: float
    gci_coarse: float
    asymptotic_ratio: float
    in_asymptotic_range: bool
    oscillatory: bool


def gci(h: Sequence[float], phi: Sequence[float], *, field: str = "objective") -> Gci:
    """The procedure on three levels: `h` fine to coarse (h1 < h2 < h3), `phi` their values."""
    h1, h2, h3 = (float(x) for x in h)
    f1, f2, f3 = (float(x) for x in phi)
    if not (0 < h1 < h2 < h3):
        raise ApplicationError(
            "the three levels' cell sizes must grow from fine to coarse (h1 < h2 < h3)", field=field
        )
    r21, r32 = h2 / h1, h3 / h2
    e21, e32 = f2 - f1, f3 - f2
    if e21 == 0 or e32 == 0:
        raise ApplicationError(
            f"{field} is the same on two neighbouring levels ({f1:g}, {f2:g}, {f3:g}): "
            "no order of accuracy can be observed; refine further or check the objective",
            field=field,
        )
    s = math.copysign(1.0, e32 / e21)
    p = _order(r21, r32, e21, e32, s)
    phi_ext = (r21**p * f1 - f2) / (r21**p - 1)
    e_a = abs((f1 - f2) / f1) if f1 else math.inf
    e_ext = abs((phi_ext - f1) / phi_ext) if phi_ext else math.inf
    gci_fine = SAFETY * e_a / (r21**p - 1)
    e32_a = abs((f2 - f3) / f2) if f2 else math.inf
    gci_coarse = SAFETY * e32_a / (r32**p - 1)
    ratio = gci_coarse / (r21**p * gci_fine) if gci_fine else math.inf
    return Gci(
        phi=(f1, f2, f3),
        h=(h1, h2, h3),
        r21=r21,
        r32=r32,
        p=p,
        phi_ext=phi_ext,
        e_a=e_a,
        e_ext=e_ext,
        gci_fine=gci_fine,
        gci_coarse=gci_coarse,
        asymptotic_ratio=ratio,
        in_asymptotic_range=abs(ratio - 1) <= ASYMPTOTIC,
        oscillatory=s < 0,
    )


def _order(r21: float, r32: float, e21: float, e32: float, s: float) -> float:
    """The observed order of accuracy by fixed-point iteration (Celik et al., eqs. 5a–c)."""
    ln_ratio, p, q = math.log(abs(e32 / e21)), 0.0, 0.0
    for _ in range(200):
        new = abs(ln_ratio + q) / math.log(r21)
        if abs(new - p) < 1e-12:
            return new
        p = new
        try:
            q = math.log((r21**p - s) / (r32**p - s))
        except (ValueError, ZeroDivisionError, OverflowError):
            break
    if not math.isfinite(p):
        raise ApplicationError("the observed order of accuracy does not converge", field="order")
    return p


def cell_size(value: float, *, kind: str, dims: int) -> float:
    """A level's representative cell size from its refinement parameter's value: cells per
    direction n (h = 1/n), a total cell count N in `dims` dimensions (h = N^(-1/dims)), or
    a cell size itself."""
    if value <= 0:
        raise ApplicationError(
            f"a refinement level of {value:g} is not positive", field="parameter"
        )
    if kind == "per_direction":
        return 1.0 / value
    if kind == "total":
        return value ** (-1.0 / dims)
    return value


def study_mesh_independence(
    *, study: Study, parameter: str, kind: str = "per_direction", dims: int = 3
) -> dict[str, Any]:
    """The GCI of each objective of the study's completed runs over `parameter`'s levels
    (the three finest; every other parameter must be the same in the runs used)."""
    rows = list(study.runs.filter(state=RunState.COMPLETED).values_list("parameters", "objectives"))
    if not rows or not any(parameter in (params or {}) for params, _ in rows):
        known = sorted({k for params, _ in rows for k in (params or {})})
        raise ApplicationError(
            f"no completed run varies {parameter!r}"
            + (f"; the study's parameters: {', '.join(known)}" if known else ""),
            field="parameter",
        )
    by_level: dict[float, dict[str, float]] = {}
    others: set[str] = set()
    for params, objectives in rows:
        value = (params or {}).get(parameter)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ApplicationError(
                f"{parameter!r} is not a number in every run: it cannot be a refinement level",
                field="parameter",
            )
        rest = {k: v for k, v in (params or {}).items() if k != parameter}
        others.add(repr(sorted(rest.items())))
        by_level.setdefault(float(value), {}).update(
            {
                k: float(v)
                for k, v in (objectives or {}).items()
                if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            }
        )
    if len(others) > 1:
        raise ApplicationError(
            f"the runs differ in parameters other than {parameter!r}: a mesh-independence "
            "study varies the refinement alone (clone it with the others fixed)",
            field="parameter",
        )
    if len(by_level) < 3:
        raise ApplicationError(
            f"{parameter!r} has {len(by_level)} completed level(s); the procedure needs three "
            "or more (add finer or coarser levels)",
            field="parameter",
        )
    levels = sorted(by_level, key=lambda v: cell_size(v, kind=kind, dims=dims))[:3]
    h = [cell_size(v, kind=kind, dims=dims) for v in levels]
    objectives = sorted(set.intersection(*(set(by_level[v]) for v in levels)))
    if not objectives:
        raise ApplicationError(
            "no objective has a value on all three finest levels", field="objective"
        )
    results: dict[str, Any] = {}
    refused: dict[str, str] = {}
    for name in objectives:
        try:
            results[name] = asdict(gci(h, [by_level[v][name] for v in levels], field=name))
        except ApplicationError as exc:  # this objective's values allow no order: said
            refused[name] = exc.message
    return {
        "parameter": parameter,
        "kind": kind,
        "dims": dims,
        "levels": [{"value": v, "h": x} for v, x in zip(levels, h, strict=True)],
        "objectives": results,
        "refused": refused,
    }


# the figures of each objective's answer that are one number, in the CSV's order
FIGURES = (
    "r21",
    "r32",
    "p",
    "phi_ext",
    "e_a",
    "e_ext",
    "gci_fine",
    "gci_coarse",
    "asymptotic_ratio",
)
CSV_COLUMNS = (
    "objective",
    *(f"phi_{level}" for level in ("fine", "medium", "coarse")),
    *(f"h_{level}" for level in ("fine", "medium", "coarse")),
    *FIGURES,
    "in_asymptotic_range",
    "oscillatory",
    "refused",
)


def mesh_independence_csv(answer: dict[str, Any]) -> str:
    """study_mesh_independence's answer as CSV: one row per objective, fine to coarse, with
    its order, extrapolated value and GCIs; an objective refused has only its reason."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for name, g in answer["objectives"].items():
        writer.writerow(
            [
                name,
                *(repr(float(v)) for v in g["phi"]),
                *(repr(float(v)) for v in g["h"]),
                *(repr(float(g[k])) for k in FIGURES),
                str(g["in_asymptotic_range"]).lower(),
                str(g["oscillatory"]).lower(),
                "",
            ]
        )
    for name, reason in answer["refused"].items():
        writer.writerow([name, *[""] * (len(CSV_COLUMNS) - 2), reason])
    return out.getvalue()
