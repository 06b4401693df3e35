"""Case preparation: render the source case into <work_dir>/case and write decomposeParDict.

When the portal rendered the case's templates already (`rendered` in run.json), the case is
copied with those texts and the template engine is never imported.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from orchestration import nofollow
from orchestration.case.casefiles import copy_case

TYPE_CHECKING = False  # typing is not imported at run time (every Slurm job starts an agent)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["decompose_par_dict", "has_mesh", "prepare_case", "split_subdomains"]

_HEADER = """/*--------------------------------*- C++ -*----------------------------------*\\
  Written by the Windtunnel run agent.
\\*---------------------------------------------------------------------------*/
FoamFile
{
    version     2.0;
    format      ascii;
    class       dictionary;
    location    "system";
    object      decomposeParDict;
}
"""


def split_subdomains(count: int) -> tuple[int, int, int]:
    """`count` as (nx, ny, 1), as square as possible: 2D cases have one cell in z."""
    ny = max(d for d in range(1, math.isqrt(count) + 1) if count % d == 0)
    return count // ny, ny, 1


def decompose_par_dict(decompose: Mapping[str, Any]) -> str:
    count = int(decompose["subdomains"])
    method = str(decompose.get("method") or "hierarchical")
    n = tuple(decompose.get("n") or split_subdomains(count))
    coeffs = f"    n           ({n[0]} {n[1]} {n[2]});\n"
    if method == "hierarchical":
        coeffs += "    order       xyz;\n"
    body = (
        f"numberOfSubdomains {count};\n\nmethod          {method};\n\n"
        f"coeffs\n{{\n{coeffs}}}\n\n{method}Coeffs\n{{\n{coeffs}}}\n"
    )
    return _HEADER + "\n" + body


def prepare_case(
    *,
    case_dir: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    context: Mapping[str, Any],
    decompose: Mapping[str, Any] | None,
    rendered: Mapping[str, str] | None = None,
) -> list[str]:
    """Render `case_dir` into `dest` (or copy it with the `rendered` texts of its templates);
    return the rendered files' relative paths."""
    if rendered is not None:
        texts = rendered
        written = copy_case(case_dir, dest, lambda _path, rel: texts.get(rel))
    else:
        from orchestration.case.render import render_case  # lazy: Jinja, when we render

        written = render_case(case_dir, dest, context)
    if decompose:
        system = os.path.join(dest, "system")
        os.makedirs(system, exist_ok=True)
        with open(os.path.join(system, "decomposeParDict"), "w") as fh:
            fh.write(decompose_par_dict(decompose))
    return written


def has_mesh(case_fd: int) -> bool:
    """Whether the case (its descriptor) holds a mesh the post-processing can read:
    constant/polyMesh/points (plain or gzipped) in the case, or in its first processor
    directory (a decomposed run that was not reconstructed); no link is followed."""
    if case_fd < 0:
        return False
    for root in ("", "processor0/"):
        for name in ("points", "points.gz"):
            try:
                os.close(nofollow.open_file(case_fd, f"{root}constant/polyMesh/{name}"))
            except OSError:
                continue
            return True
    return False
