"""Reads on studies and runs, always scoped to the requester's tenant."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection
from django.db.models import Count, QuerySet, Sum

from core import hooks
from core.exceptions import NotFound
from core.hooks import Hook
from core.ids import parse_uuid
from studies.choices import RunState, StudyState
from studies.figures import core_hours_expression
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
    page's with `studies_count_runs`. A study being deleted is gone from every read."""
    return (
        Study.objects.filter(tenant=_tenant(user))
        .exclude(state=StudyState.DELETING)
        .select_related("template", "backend", "owner", "upload")
        .order_by("-created_at")
    )


def studies_count_runs(*, studies: Iterable[Study]) -> None:
    """Count the runs of these studies by state in one grouped query on the (study, state)
    index, kept on each study for `study_progress` (as `n_<state>`), with their core-hours
    (as `core_hours_total`, for `study_core_hours`)."""
    studies = list(studies)
    counts: dict[Any, dict[str, int]] = {s.pk: {} for s in studies}
    hours: dict[Any, float] = {s.pk: 0.0 for s in studies}
    if studies:
        rows = (
            Run.objects.filter(study_id__in=list(counts))
            .order_by()
            .values_list("study_id", "state")
            .annotate(n=Count("id"), hours=Sum(core_hours_expression()))
        )
        for study_id, state, n, used in rows:
            counts[study_id][state] = n
            hours[study_id] += used or 0.0
    for study in studies:
        for state in RunState:
            setattr(study, f"n_{state.value}", counts[study.pk].get(state.value, 0))
        study.core_hours_total = hours[study.pk]  # type: ignore[attr-defined]


def study_core_hours(study: Study) -> float:
    """The core-hours the study's runs held (studies.figures), its runs running included
    (up to now); read from `studies_count_runs` when it counted the study, else one
    aggregate over the study's runs that started."""
    total = getattr(study, "core_hours_total", None)
    if total is None:
        total = (
            Run.objects.filter(study=study, started_at__isnull=False)
            .order_by()
            .aggregate(h=Sum(core_hours_expression()))["h"]
        )
    return round(float(total or 0.0), 6)


def study_get(*, user, study_id) -> Study:
    pk = parse_uuid(study_id)
    study = study_list_visible_to(user=user).filter(pk=pk).first() if pk else None
    if study is None:
        raise NotFound("No study with that id in your tenant.")
    return study


def run_list_visible_to(*, user) -> QuerySet[Run]:
    """The tenant's runs, but for those of a study being deleted (a probe of the tenant's
    studies first: while none is, the runs are read as they always were, with no join)."""
    tenant = _tenant(user)
    runs = Run.objects.filter(tenant=tenant).select_related("study", "backend")
    deleting = list(
        Study.objects.filter(tenant=tenant, state=StudyState.DELETING).values_list("pk", flat=True)
    )
    return runs.exclude(study_id__in=deleting) if deleting else runs


def run_count_visible_to(*, user) -> int:
    """How many runs run_list_visible_to holds, from the studies' run counts (a study's runs
    are made at its submission and by its adaptive batches, which keep `run_count`; a draft
    has none yet): one read of the tenant's studies instead of a count of every run, which
    visits each row while a large cancel or deletion rewrites them."""
    studies = Study.objects.filter(tenant=_tenant(user)).exclude(
        state__in=[StudyState.DRAFT, StudyState.DELETING]
    )
    return int(studies.aggregate(n=Sum("run_count"))["n"] or 0)


def run_get(*, user, run_id) -> Run:
    pk = parse_uuid(run_id)
    run = run_list_visible_to(user=user).filter(pk=pk).first() if pk else None
    if run is None:
        raise NotFound("No run with that id in your tenant.")
    return run


def run_results_source(*, run: Run) -> Run:
    """The run whose series, log, objectives and archive `run` shows: the run it was reused
    from (always of its own tenant), else itself."""
    if not run.reused_from_id:
        return run
    source = (
        Run.objects.select_related("study", "backend")
        .filter(pk=run.reused_from_id, tenant_id=run.tenant_id)
        .first()
    )
    return source or run


def upload_list_visible_to(*, user) -> QuerySet[Upload]:
    return Upload.objects.filter(tenant=_tenant(user)).order_by("-created_at")


def queue_positions(*, tenant_id: int, runs: Sequence[Run]) -> dict[str, int]:
    """1-based position of each queued run in its tenant's queue on its backend, as admission
    takes that queue (scheduler.policies): the tenant's queued runs on the same backend,
    but a cancelled study's, ordered by submission (queued at, study, index), high priority
    first where the backend's policy goes by priority. Counted for these runs only: the runs
    ahead of the first of them, then a window over the span from the first to the last. A
    page of a 100,000-run queue costs its span, not the queue."""
    groups: dict[int, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.backend_id, []).append(run)
    out: dict[str, int] = {}
    for backend_id, group in groups.items():
        policy = group[0].backend.admission_policy if group[0].backend_id else ""
        by_priority = bool(hooks.call(Hook.QUEUE_BY_PRIORITY, policy=policy))
        out.update(_positions_on(tenant_id, backend_id, group, by_priority=by_priority))
    return out


def _positions_on(
    tenant_id: int, backend_id: int, runs: Sequence[Run], *, by_priority: bool
) -> dict[str, int]:
    """queue_positions of runs queued on one backend."""
    rank = "-r.priority" if by_priority else "0"
    keys = [
        (-r.priority if by_priority else 0, r.queued_at, str(r.study_id), r.index) for r in runs
    ]
    low, high = min(keys), max(keys)
    table, studies = Run._meta.db_table, Study._meta.db_table
    key = f"({rank}, r.queued_at, r.study_id, r.index)"
    if low[:3] == high[:3]:
        # a page of one study queued at once (the usual case): the span said as an index
        # range, which the planner estimates as the few rows it is (a row comparison over a
        # study whose runs share one queued_at looks like the whole study: a sequential scan)
        span = (
            f"{rank} = %(lp)s AND r.queued_at = %(lq)s AND r.study_id = %(ls)s::uuid"
            " AND r.index >= %(li)s AND r.index <= %(hi)s"
        )
    else:
        span = (
            f"{key} >= (%(lp)s, %(lq)s, %(ls)s::uuid, %(li)s)"
            f" AND {key} <= (%(hp)s, %(hq)s, %(hs)s::uuid, %(hi)s)"
        )
    queued = (
        f"FROM {table} r JOIN {studies} s ON s.id = r.study_id"
        " WHERE r.tenant_id = %(tenant)s AND r.state = %(state)s AND r.backend_id = %(backend)s"
        " AND s.state <> %(cancelled)s"
    )
    with connection.cursor() as cur:
        cur.execute(
            f"""
            WITH ahead AS (
              SELECT count(*) AS n {queued}
                AND {key} < (%(lp)s, %(lq)s, %(ls)s::uuid, %(li)s)
            )
            SELECT q.id, ahead.n + q.pos FROM ahead, (
              SELECT r.id, row_number() OVER (ORDER BY {rank}, r.queued_at, r.study_id, r.index)
                AS pos
              {queued} AND {span}
            ) q WHERE q.id = ANY(%(ids)s::uuid[])
            """,
            {
                "tenant": tenant_id,
                "backend": backend_id,
                "state": RunState.PENDING.value,
                "cancelled": StudyState.CANCELLED.value,
                "lp": low[0],
                "lq": low[1],
                "ls": low[2],
                "li": low[3],
                "hp": high[0],
                "hq": high[1],
                "hs": high[2],
                "hi": high[3],
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
    success), each of those apart, still active, and by state; `cancelling`: of the
    cancelled, those a cancel is still ending in the background."""
    counts = _annotated_counts(study)
    if counts is None:  # one grouped query on the (study, state) index
        rows = study.runs.order_by().values_list("state").annotate(n=Count("id"))
        counts = {s.value: 0 for s in RunState}
        counts.update(dict(rows))
    cancelling = 0
    if study.state == StudyState.CANCELLED and counts["pending"]:
        # its queued runs are being ended in the background (state.study_cancel_queued):
        # none will start, so they count as cancelled from the cancel on
        cancelling = counts["pending"]
        counts = {**counts, "cancelled": counts["cancelled"] + cancelling, "pending": 0}
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
        "cancelling": cancelling,
    }
