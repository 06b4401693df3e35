"""Reads on studies and runs, always scoped to the requester's tenant."""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.db.models import Count, Q, QuerySet

from core.exceptions import NotFound
from studies.choices import RunState
from studies.models import Simulation, Study, Upload
from tenancy.selectors import tenant_for_user


def _tenant(user):
    tenant = tenant_for_user(user=user)
    if tenant is None:
        raise NotFound()
    return tenant


def study_list_visible_to(*, user) -> QuerySet[Study]:
    counts = {f"n_{s.value}": Count("runs", filter=Q(runs__state=s.value)) for s in RunState}
    return (
        Study.objects.filter(tenant=_tenant(user))
        .select_related("template", "backend", "owner", "upload")
        .annotate(**counts)
        .order_by("-created_at")
    )


def _uuid(value) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def study_get(*, user, study_id) -> Study:
    pk = _uuid(study_id)
    study = study_list_visible_to(user=user).filter(pk=pk).first() if pk else None
    if study is None:
        raise NotFound("No study with that id in your tenant.")
    return study


def run_list_visible_to(*, user) -> QuerySet[Simulation]:
    return Simulation.objects.filter(tenant=_tenant(user)).select_related("study", "backend")


def run_get(*, user, run_id) -> Simulation:
    pk = _uuid(run_id)
    run = run_list_visible_to(user=user).filter(pk=pk).first() if pk else None
    if run is None:
        raise NotFound("No run with that id in your tenant.")
    return run


def upload_list_visible_to(*, user) -> QuerySet[Upload]:
    return Upload.objects.filter(tenant=_tenant(user)).order_by("-created_at")


def queue_positions(*, tenant_id: int, run_ids: Iterable) -> dict[str, int]:
    """1-based position of each queued run in its tenant's FIFO queue (one query)."""
    ids = [str(i) for i in run_ids]
    if not ids:
        return {}
    table = Simulation._meta.db_table
    with connection.cursor() as cur:
        cur.execute(
            f"""
            SELECT id, pos FROM (
              SELECT id, row_number() OVER (ORDER BY queued_at, study_id, index) AS pos
              FROM {table} WHERE tenant_id = %s AND state = %s
            ) q WHERE id = ANY(%s::uuid[])
            """,
            [tenant_id, RunState.PENDING.value, ids],
        )
        return {str(r[0]): int(r[1]) for r in cur.fetchall()}


def study_progress(study: Study) -> dict[str, Any]:
    counts = {s.value: getattr(study, f"n_{s.value}", None) for s in RunState}
    if any(v is None for v in counts.values()):
        rows = study.runs.values_list("state").annotate(n=Count("id"))
        counts = {s.value: 0 for s in RunState}
        counts.update(dict(rows))
    total = sum(counts.values())
    done = counts["completed"] + counts["failed"] + counts["cancelled"]
    return {
        "total": total,
        "done": done,
        "percent": round(100 * done / total, 1) if total else 0.0,
        "by_state": counts,
    }


def study_results(*, study: Study) -> list[dict[str, Any]]:
    rows = []
    for run in study.runs.order_by("index").only(
        "id",
        "index",
        "parameters",
        "state",
        "objectives",
        "iterations",
        "started_at",
        "finished_at",
        "end_reason",
        "message",
        "attempt",
        "trust",
    ):
        rows.append(
            {
                "run": str(run.id),
                "index": run.index,
                "parameters": run.parameters,
                "state": run.state,
                "objectives": run.objectives or {},
                "iterations": run.iterations,
                "wall_seconds": run.wall_seconds,
                "end_reason": run.end_reason,
                "attempts": run.attempt,
                "trust": run.trust,
            }
        )
    return rows


def _cell(value):
    """A text value as a spreadsheet will not run it as a formula (CSV injection): one that
    starts like a formula gets a leading apostrophe. Numbers stay numbers."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def study_results_csv(*, study: Study) -> str:
    rows = study_results(study=study)
    params = list((study.spec.get("parameters") or {}).keys())
    for row in rows:
        for name in row["parameters"]:
            if name not in params:
                params.append(name)
    objectives = list((study.objectives or {}).keys())
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(
        [
            "run",
            "index",
            *params,
            "state",
            "trust",
            *objectives,
            # a parameter may itself be called `iterations` (the airfoil template's is)
            "solver_iterations" if "iterations" in params else "iterations",
            "wall_seconds",
            "end_reason",
        ]
    )
    for row in rows:
        writer.writerow(
            [
                row["run"],
                row["index"],
                *[_cell(row["parameters"].get(p, "")) for p in params],
                row["state"],
                row["trust"],
                *[
                    "" if row["objectives"].get(o) is None else repr(row["objectives"][o])
                    for o in objectives
                ],
                "" if row["iterations"] is None else row["iterations"],
                "" if row["wall_seconds"] is None else f"{row['wall_seconds']:.3f}",
                row["end_reason"],
            ]
        )
    return out.getvalue()
