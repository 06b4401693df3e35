"""Warm starts (a study's `warm_start: true`): a steady run starts from the converged fields of
the nearest completed run of its study on the same mesh, picked when it is dispatched; while
no run of its mesh has completed, from the nearest of another mesh (a coarser or finer level
of a mesh study), whose write OpenFOAM's mapFields maps onto the run's mesh once it is made
(orchestration/agent/mapping.py).

Same mesh: the same values of every placeholder the case's mesh files use (blockMeshDict,
snappyHexMeshDict, …, constant/polyMesh/…); a case whose mesh files have none has one mesh.
Nearest: the smallest distance over the other parameters (every parameter, the mesh's too,
for a source of another mesh), each scaled by its range among the candidates and the run (a
parameter that is not a number counts 1 when it differs); ties go to the lower index. With a
second completed neighbour near the line through the nearest one and the run (the run
between them, or at most two spacings beyond), the start is the fields linearly between or
beyond the two (first + w × (second − first)): along a polar the flow changes smoothly, and
a linear guess starts the solver far closer than either neighbour
(orchestration/agent/warm.py). The source must have run on the same backend (its folder is
beside the run's) and reported its writes. The run's identity then includes its source's
(studies.identity.warm_identity), and its agent is told where to start from
(orchestration/agent/resume.py, warm mode)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from orchestration.case import caseplan
from studies.choices import COMPLETE_END_REASONS, RunState
from studies.identity import warm_identity
from studies.models import Run, Study
from studies.transitions import runs_record_warm_sources

__all__ = ["MESH_FILES", "is_mesh_file", "warm_sources_pick"]

MESH_FILES = (
    "system/blockMeshDict",
    "system/snappyHexMeshDict",
    "system/extrudeMeshDict",
    "system/refineMeshDict",
    "system/topoSetDict",
    "system/createPatchDict",
    "system/surfaceFeatureExtractDict",
    "system/surfaceFeaturesDict",
    "system/mirrorMeshDict",
)
CANDIDATES = 2000  # the completed runs a dispatch looks at (the study's latest)


def is_mesh_file(rel: str) -> bool:
    return rel in MESH_FILES or rel.startswith(("constant/polyMesh/", "constant/triSurface/"))


def _distance(a: Mapping[str, Any], b: Mapping[str, Any], spans: Mapping[str, float]) -> float:
    total = 0.0
    for name in a.keys() | b.keys():
        x, y = a.get(name), b.get(name)
        if isinstance(x, int | float) and isinstance(y, int | float):
            span = spans.get(name) or 0.0
            total += ((float(x) - float(y)) / span) ** 2 if span > 0 else 0.0
        elif x != y:
            total += 1.0
    return math.sqrt(total)


def _numbers(params: Mapping[str, Any], spans: Mapping[str, float]) -> dict[str, float] | None:
    """The scaled numeric parameters (None when one is not a number)."""
    out = {}
    for name, span in spans.items():
        value = params.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        out[name] = float(value) / span if span > 0 else 0.0
    return out


def _second(
    first: Run, same: list[Run], mine: Mapping[str, Any], spans: Mapping[str, float]
) -> tuple[Run, float] | None:
    """The second neighbour and the weight w of the run's start first + w × (second −
    first): the nearest other candidate with the run on, or near, the line through the two,
    between them or at most one spacing beyond (−1 ≤ w ≤ 2). None: the first alone."""
    x, x1 = _numbers(mine, spans), _numbers(first.parameters, spans)
    if x is None or x1 is None or not spans:
        return None
    names = list(spans)
    offset = [x[n] - x1[n] for n in names]
    reach = math.sqrt(sum(v * v for v in offset))
    best: tuple[float, Run, float] | None = None
    for c in same:
        x2 = _numbers(c.parameters, spans)
        others_equal = all(c.parameters.get(n) == mine.get(n) for n in mine if n not in spans)
        if c.pk == first.pk or x2 is None or not others_equal:
            continue
        d = [x2[n] - x1[n] for n in names]
        length = sum(v * v for v in d)
        if length <= 0:
            continue
        w = sum(a * b for a, b in zip(offset, d, strict=True)) / length
        off_line = math.sqrt(sum((o - w * v) ** 2 for o, v in zip(offset, d, strict=True)))
        if not -2.0 <= w <= 3.0 or off_line > 0.25 * max(reach, 1e-12):
            continue
        gap = math.sqrt(sum((x[n] - x2[n]) ** 2 for n in names))
        if best is None or (gap, c.index) < (best[0], best[1].index):
            best = (gap, c, w)
    return (best[1], best[2]) if best is not None else None


def warm_sources_pick(
    *, study: Study, runs: Iterable[Run], plan: caseplan.CasePlan | None
) -> dict[Any, Run]:
    """For each of `runs` (claimed, of `study`, without a resume of their own) the run it
    starts warm from, when there is one; recorded on the runs (resume, identity)."""
    waiting = [run for run in runs if not run.resume]
    if not waiting or not (study.spec or {}).get("warm_start"):
        return {}
    mesh_names = sorted(plan.names_in(is_mesh_file)) if plan is not None else []
    candidates = [
        c
        for c in Run.objects.filter(
            study=study, state=RunState.COMPLETED, end_reason__in=COMPLETE_END_REASONS
        )
        .only("id", "index", "attempt", "parameters", "context", "writes", "identity", "backend")
        .order_by("-finished_at")[:CANDIDATES]
        if isinstance(c.writes, dict)
        and c.writes.get("attempt") == c.attempt
        and c.writes.get("times")
    ]
    # the claim reads no parameters: one read for the batch
    parameters = dict(
        Run.objects.filter(pk__in=[r.pk for r in waiting]).values_list("pk", "parameters")
    )
    picked: dict[Any, Run] = {}
    seconds: dict[Any, tuple[Run, float] | None] = {}
    maps: set[Any] = set()  # the runs whose source has another mesh
    for run in waiting:
        own = parameters.get(run.pk) or {}
        mesh = [run.context.get(n) for n in mesh_names]
        here = [c for c in candidates if c.backend_id == run.backend_id]
        same = [c for c in here if [c.context.get(n) for n in mesh_names] == mesh]
        if not same and mesh_names and here:  # only other meshes yet: mapFields maps one
            maps.add(run.pk)
            same = here
        if not same:
            continue
        varying = [n for n in own if run.pk in maps or n not in mesh_names]
        spans: dict[str, float] = {}
        for name in varying:
            values = [
                float(v)
                for v in [own.get(name), *(c.parameters.get(name) for c in same)]
                if isinstance(v, int | float) and not isinstance(v, bool)
            ]
            spans[name] = (max(values) - min(values)) if values else 0.0

        mine = {n: own.get(n) for n in varying}

        def key(c: Run, mine: dict = mine, spans: dict[str, float] = spans) -> tuple:
            theirs = {n: c.parameters.get(n) for n in mine}
            return (_distance(mine, theirs, spans), c.index)

        picked[run.pk] = min(same, key=key)
        numeric = {
            n: span
            for n, span in spans.items()
            if isinstance(mine.get(n), int | float) and not isinstance(mine.get(n), bool)
        }
        if run.pk not in maps:  # a blend is of two fields on one mesh
            seconds[run.pk] = _second(picked[run.pk], same, mine, numeric)
    if not picked:
        return {}
    rows: list[tuple[Run, Mapping[str, Any], str]] = []
    for run in waiting:
        source = picked.get(run.pk)
        if source is None:
            continue
        resume: dict[str, Any] = {
            "source": str(source.pk),
            "source_index": source.index,
            "attempt": source.attempt,
            "time": str(source.writes["times"][-1]),
            "required": False,  # its folder gone meanwhile: the run starts cold
        }
        if run.pk in maps:
            resume["map"] = True
        second = seconds.get(run.pk)
        if second is not None:
            other, weight = second
            resume["blend"] = {
                "source": str(other.pk),
                "source_index": other.index,
                "attempt": other.attempt,
                "time": str(other.writes["times"][-1]),
                "weight": weight,
            }
        identity = warm_identity(run.identity, source.identity)
        run.resume, run.identity = resume, identity
        rows.append((run, resume, identity))
    runs_record_warm_sources(rows=rows)
    return picked
