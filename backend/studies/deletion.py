"""A study's deletion: hidden at once, whatever its size; its rows and files removed in the
background with progress the user sees.

`study_delete` (the API's DELETE) marks the study `deleting` and records how many runs go:
from that commit on every read of it answers 404 and the lists leave it and its runs out
(studies.selectors). The worker's `study_delete_rows` then hands the results other studies
reuse over to them and deletes the runs' telemetry (Hook.STUDY_DELETING), deletes the runs
DELETE_CHUNK at a time (each chunk's directories and archives with it, counted on the study
row: `studies_deleting` reads the progress), and last the study itself. What the study held of
the tenant's storage quota is freed as its runs go (usage is derived from the runs); the
tenant's scheduling pass runs once it is gone. A lost job is taken up again by the periodic
settle (studies.state.studies_settle).
"""

from __future__ import annotations

import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from core import hooks, jobs
from core.exceptions import Conflict, ErrorCode
from core.hooks import Hook
from core.jobs import Job
from studies.choices import ACTIVE_STATES, HOLDING_STATES, StudyState
from studies.models import Run, Study

DELETE_CHUNK = 5000  # runs per transaction of the background deletion
FILES_CHUNK = 500  # runs whose files one job deletes
RESUME_AFTER = datetime.timedelta(minutes=2)  # a deletion this long without progress is lost


@transaction.atomic
def study_delete(*, study: Study) -> None:
    """Delete a study that has no queued or running run (a draft, or an ended study): hidden
    at once, removed in the background. A study already being deleted is left to it."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.state == StudyState.DELETING:
        return
    # a cancelled study's queued runs may still be ending in the background: they never
    # start, and go with the study
    active = HOLDING_STATES if study.state == StudyState.CANCELLED else ACTIVE_STATES
    if study.state != StudyState.DRAFT and study.runs.filter(state__in=active).exists():
        raise Conflict(
            "this study still has queued or running runs; cancel it first", code=ErrorCode.STATE
        )
    study.state = StudyState.DELETING
    study.delete_total = study.runs.count()
    study.delete_done = 0
    study.save(update_fields=["state", "delete_total", "delete_done", "updated_at"])
    jobs.enqueue(Job.DELETE_STUDY, str(study.pk))


def study_delete_rows(*, study_id: Any) -> int:
    """The background half of study_delete: the study's reused results handed over and its
    telemetry deleted, then its runs a chunk per transaction (their files after each), then
    the study. Idempotent: a repeat goes on where the last one stopped. How many runs it
    deleted."""
    study = Study.objects.filter(pk=study_id, state=StudyState.DELETING).first()
    if study is None:
        return 0
    with transaction.atomic():
        # the results other studies' runs reuse handed over to them, the runs' telemetry
        # deleted (a repeat finds neither left)
        hooks.call(Hook.STUDY_DELETING, study=study)
    deleted = 0
    while True:
        with transaction.atomic():
            ids = study_runs_delete_chunk(study_id=study.pk)
            if not ids:
                break
            Study.objects.filter(pk=study.pk).update(
                delete_done=F("delete_done") + len(ids), updated_at=timezone.now()
            )
            # the runs' directories and archives go too, once their rows are gone
            for i in range(0, len(ids), FILES_CHUNK):
                jobs.enqueue(Job.DELETE_RUN_FILES, ids[i : i + FILES_CHUNK])
        deleted += len(ids)
    with transaction.atomic():
        study.delete()  # its runs gone, what is left to cascade is a handful of rows
        # what it stored is freed: runs held for the tenant's storage quota may start now
        jobs.enqueue(Job.SCHEDULE_TENANT, study.tenant_id)
    return deleted


def study_runs_delete_chunk(*, study_id: Any) -> list[str]:
    """Up to DELETE_CHUNK of a study's runs deleted as a set: runs of other studies that
    reused one of them lose the link (as `on_delete=SET_NULL` says), then one DELETE. The
    ids deleted."""
    table = connection.ops.quote_name(Run._meta.db_table)
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT id FROM {table} WHERE study_id = %s ORDER BY index LIMIT %s",
            [study_id, DELETE_CHUNK],
        )
        ids = [row[0] for row in cur.fetchall()]
        if not ids:
            return []
        cur.execute(
            f"UPDATE {table} SET reused_from_id = NULL WHERE study_id <> %s"
            " AND reused_from_id = ANY(%s)",
            [study_id, ids],
        )
        cur.execute(f"DELETE FROM {table} WHERE id = ANY(%s)", [ids])
    return [str(i) for i in ids]


def studies_deleting(*, tenant_id: int) -> QuerySet[Study]:
    """The tenant's studies being deleted, with their progress (delete_done of delete_total
    runs removed), the oldest deletion first."""
    return (
        Study.objects.filter(tenant_id=tenant_id, state=StudyState.DELETING)
        .only("id", "name", "delete_total", "delete_done", "updated_at")
        .order_by("updated_at")
    )


def deletions_resume() -> int:
    """Deletions whose job was lost (a worker restarted mid-way): sent again; how many."""
    stale = Study.objects.filter(
        state=StudyState.DELETING, updated_at__lt=timezone.now() - RESUME_AFTER
    ).values_list("pk", flat=True)
    ids = [str(pk) for pk in stale]
    for study_id in ids:
        jobs.send(Job.DELETE_STUDY, study_id)
    return len(ids)
