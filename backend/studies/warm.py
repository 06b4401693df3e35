"""Warm starts (a study's `warm_start: true`): a steady run starts from the converged fields of
the nearest completed run of its study on the same mesh, picked when it is dispatched.

Same mesh: the same values of every placeholder the case's mesh files use (blockMeshDict,
snappyHexMeshDict, …, constant/polyMesh/…); a case whose mesh files have none has one mesh.
Nearest: the smallest distance over the other parameters, each scaled by its range among the
candidates and the run (a parameter that is not a number counts 1 when it differs); ties go
to the lower index. The source must have run on the same backend (its folder is beside the
run's) and reported its writes. The run's identity then includes its source's
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
    for run in waiting:
        own = parameters.get(run.pk) or {}
        mesh = [run.context.get(n) for n in mesh_names]
        same = [
            c
            for c in candidates
            if c.backend_id == run.backend_id and [c.context.get(n) for n in mesh_names] == mesh
        ]
        if not same:
            continue
        varying = [n for n in own if n not in mesh_names]
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
        identity = warm_identity(run.identity, source.identity)
        run.resume, run.identity = resume, identity
        rows.append((run, resume, identity))
    runs_record_warm_sources(rows=rows)
    return picked
