"""Reads on studies and runs, always scoped to the requester's tenant."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection
from django.db.models import Count, QuerySet

from core.exceptions import NotFound
from core.ids import parse_uuid
from studies.choices import RunState
from studies.models import Run, Study, Upload
from tenancy.selectors import tenant_for_user


def _tenant(user):
    tenant = tenant_for_user(user=user)
    if tenant is None:
        raise NotFound()
    return tenant


def study_list_visible_to(*, user) -> QuerySet[Study]:
    """The tenant's studies, newest first. Their runs are not counted here (a count joined
    into the list would count every run of every study before the page is cut): count the
    page's with `studies_count_runs`."""
    return (
        Study.objects.filter(tenant=_tenant(user))
        .select_related("template", "backend", "owner", "upload")
        .order_by("-created_at")
    )


def studies_count_runs(*, studies: Iterable[Study]) -> None:
    """Count the runs of these studies by state in one grouped query on the (study, state)
    index, kept on each study for `study_progress` (as `n_<state>`)."""
    studies = list(studies)
    counts: dict[Any, dict[str, int]] = {s.pk: {} for s in studies}
    if studies:
        rows = (
            Run.objects.filter(study_id__in=list(counts))
            .order_by()
            .values_list("study_id", "state")
            .annotate(n=Count("id"))
        )
        for study_id, state, n in rows:
            counts[study_id][state] = n
    for study in studies:
        for state in RunState:
            setattr(study, f"n_{state.value}", counts[study.pk].get(state.value, 0))


def study_get(*, user, study_id) -> Study:
    pk = parse_uuid(study_id)
    study = study_list_visible_to(user=user).filter(pk=pk).first() if pk else None
    if study is None:
        raise NotFound("No study with that id in your tenant.")
    return study


def run_list_visible_to(*, user) -> QuerySet[Run]:
    return Run.objects.filter(tenant=_tenant(user)).select_related("study", "backend")


def run_get(*, user, run_id) -> Run:
    pk = parse_uuid(run_id)
    run = run_list_visible_to(user=user).filter(pk=pk).first() if pk else None
    if run is None:
        raise NotFound("No run with that id in your tenant.")
    return run


def upload_list_visible_to(*, user) -> QuerySet[Upload]:
    return Upload.objects.filter(tenant=_tenant(user)).order_by("-created_at")


def queue_positions(*, tenant_id: int, runs: Sequence[Run]) -> dict[str, int]:
    """1-based position of each queued run in its tenant's FIFO queue, counted for these runs
    only: the runs ahead of the first of them (an index range count), then a window over the
    span from the first to the last. A page of a 100,000-run queue costs its span, not the
    queue."""
    keys = [(r.queued_at, str(r.study_id), r.index) for r in runs]
    if not keys:
        return {}
    low, high = min(keys), max(keys)
    table = Run._meta.db_table
    with connection.cursor() as cur:
        cur.execute(
            f"""
            WITH ahead AS (
              SELECT count(*) AS n FROM {table}
              WHERE tenant_id = %(tenant)s AND state = %(state)s
                AND (queued_at, study_id, index) < (%(lq)s, %(ls)s::uuid, %(li)s)
            )
            SELECT q.id, ahead.n + q.pos FROM ahead, (
              SELECT id, row_number() OVER (ORDER BY queued_at, study_id, index) AS pos
              FROM {table}
              WHERE tenant_id = %(tenant)s AND state = %(state)s
                AND (queued_at, study_id, index) >= (%(lq)s, %(ls)s::uuid, %(li)s)
                AND (queued_at, study_id, index) <= (%(hq)s, %(hs)s::uuid, %(hi)s)
            ) q WHERE q.id = ANY(%(ids)s::uuid[])
            """,
            {
                "tenant": tenant_id,
                "state": RunState.PENDING.value,
                "lq": low[0],
                "ls": low[1],
                "li": low[2],
                "hq": high[0],
                "hs": high[1],
                "hi": high[2],
                "ids": [str(r.id) for r in runs],
            },
        )
        return {str(r[0]): int(r[1]) for r in cur.fetchall()}


def _annotated_counts(study: Study) -> dict[str, int] | None:
    """The study's runs counted by state, if a selector annotated them (`n_<state>`)."""
    counts: dict[str, int] = {}
    for state in RunState:
        n = getattr(study, f"n_{state.value}", None)
        if n is None:
            return None
        counts[state.value] = n
    return counts


def study_progress(study: Study) -> dict[str, Any]:
    """The study's runs counted: ended (`done`: completed, failed or cancelled — not
    success), each of those apart, still active, and by state."""
    counts = _annotated_counts(study)
    if counts is None:  # one grouped query on the (study, state) index
        rows = study.runs.order_by().values_list("state").annotate(n=Count("id"))
        counts = {s.value: 0 for s in RunState}
        counts.update(dict(rows))
    total = sum(counts.values())
    done = counts["completed"] + counts["failed"] + counts["cancelled"]
    return {
        "total": total,
        "done": done,
        "percent": round(100 * done / total, 1) if total else 0.0,
        "completed": counts["completed"],
        "failed": counts["failed"],
        "cancelled": counts["cancelled"],
        "active": total - done,
        "by_state": counts,
    }
