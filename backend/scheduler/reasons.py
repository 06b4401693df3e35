"""Why a tenant's queued runs wait, as admission concluded (scheduler.admission): written
on the runs (`wait_reason`, `wait_detail`: a reason is not a state, the run stays pending),
and only when the conclusions changed, so a pass over a queue of 100,000 runs that
concludes what the last one did writes nothing (QueueReasons keeps their fingerprint).
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from catalog.choices import ImageStatus
from catalog.models import Image
from scheduler.models import QueueReasons
from studies.choices import RunState, StudyState, WaitReason
from studies.models import Run, Study

ACTIVE_STUDY_STATES = (StudyState.SUBMITTED, StudyState.RUNNING)  # those with queued runs


def wait_reasons_write(
    cur: Any,
    *,
    tenant_id: int,
    quota_problem: str | None,
    full_backends: dict[int, tuple[str, str]],
    images: dict[int, str],
) -> None:
    """Tell the tenant's queued runs why they wait (a pass's conclusions: the quota, full
    backends, images not built yet), unless they already say it."""
    fingerprint = _reasons_fingerprint(quota_problem, full_backends, images)
    if _reasons_current(cur, tenant_id=tenant_id, fingerprint=fingerprint):
        return
    _record_wait_reasons(
        cur,
        tenant_id=tenant_id,
        quota_problem=quota_problem,
        full_backends=full_backends,
        images=images,
    )
    cur.execute(_REASONS_SAVE_SQL, [tenant_id, fingerprint])


# A pass that concludes what the last one did, with no run queued since, writes no wait
# reason; at least this often the reasons are rewritten anyway (a run requeued in place
# keeps its "retry" until then)
REASONS_REFRESH = timedelta(seconds=60)
_REASONS_SQL = (
    f"SELECT fingerprint, recorded_at, now() FROM {QueueReasons._meta.db_table}"
    " WHERE tenant_id = %s"
)
_REASONS_SAVE_SQL = (
    f"INSERT INTO {QueueReasons._meta.db_table} (tenant_id, fingerprint, recorded_at)"
    " VALUES (%s, %s, now()) ON CONFLICT (tenant_id)"
    " DO UPDATE SET fingerprint = EXCLUDED.fingerprint, recorded_at = EXCLUDED.recorded_at"
)
# runs queued since the reasons were written come with their study's submission or
# extension, which saves the study: a look at the tenant's active studies finds them
_STUDIES_CHANGED_SQL = (
    f"SELECT EXISTS (SELECT 1 FROM {Study._meta.db_table}"
    " WHERE tenant_id = %s AND state = ANY(%s) AND updated_at > %s)"
)


def _reasons_fingerprint(
    quota_problem: str | None, full_backends: dict[int, tuple[str, str]], images: dict[int, str]
) -> str:
    conclusions = [quota_problem, sorted(full_backends.items()), sorted(images.items())]
    return hashlib.sha256(json.dumps(conclusions, default=str).encode()).hexdigest()


def _reasons_current(cur: Any, *, tenant_id: int, fingerprint: str) -> bool:
    """Whether the queued runs already carry the reasons this pass would write."""
    cur.execute(_REASONS_SQL, [tenant_id])
    row = cur.fetchone()
    if row is None or row[0] != fingerprint or row[2] - row[1] > REASONS_REFRESH:
        return False
    # runs queued since (a submission, an extension) have no reason yet. recorded_at is when
    # that pass began; the margin covers a study saved just before it and committed after
    since = row[1] - timedelta(seconds=2)
    cur.execute(_STUDIES_CHANGED_SQL, [tenant_id, list(ACTIVE_STUDY_STATES), since])
    return not cur.fetchone()[0]


def _record_wait_reasons(
    cur: Any,
    *,
    tenant_id: int,
    quota_problem: str | None,
    full_backends: dict[int, tuple[str, str]],
    images: dict[int, str] | None = None,
) -> None:
    """Tell queued runs why they wait. Writes only rows whose reason changed (a wait reason
    is not a state: the run stays pending)."""
    table, studies = Run._meta.db_table, Study._meta.db_table
    pending = (
        f"UPDATE {table} r SET wait_reason = %s, wait_detail = %s WHERE r.tenant_id = %s"
        " AND r.state = %s AND (r.retry_at IS NULL OR r.retry_at <= now())"  # keep 'retry'
        # not a cancelled study's (its queued runs are being ended: they wait for nothing)
        f" AND NOT EXISTS (SELECT 1 FROM {studies} c WHERE c.id = r.study_id"
        f" AND c.state = '{StudyState.CANCELLED.value}')"
    )
    changed = " AND (r.wait_reason <> %s OR r.wait_detail <> %s)"
    for image_id, detail in (images or {}).items():
        cur.execute(
            pending
            + changed
            + f" AND r.study_id IN (SELECT id FROM {studies} WHERE image_id = %s)",
            [WaitReason.IMAGE, detail[:200], tenant_id, RunState.PENDING]
            + [WaitReason.IMAGE, detail[:200], image_id],
        )
    not_image = f" AND r.study_id NOT IN (SELECT id FROM {studies} WHERE image_id = ANY(%s))"
    image_ids = list(images or {})
    for bid, (reason, detail) in full_backends.items():
        cur.execute(
            pending + changed + " AND r.backend_id = %s" + (not_image if image_ids else ""),
            [reason, detail[:200], tenant_id, RunState.PENDING, reason, detail[:200], bid]
            + ([image_ids] if image_ids else []),
        )
    if quota_problem:
        detail = f"tenant quota: {quota_problem}"[:200]
        cur.execute(
            pending
            + changed
            + " AND NOT (r.backend_id = ANY(%s))"
            + (not_image if image_ids else ""),
            [WaitReason.QUOTA, detail, tenant_id, RunState.PENDING, WaitReason.QUOTA, detail]
            + [list(full_backends)]
            + ([image_ids] if image_ids else []),
        )


def runs_hold(cur: Any, *, tenant_id: int, reason: WaitReason, detail: str) -> None:
    """Something of the tenant's stops its whole queue (its storage quota or its monthly
    core-hour budget is used up): its queued runs wait for that (`reason`, the figures and
    what to do in the detail), written as the other reasons are, only when they changed and
    not twice for the same conclusion (the fingerprint). A run waiting for its image or a
    retry keeps that reason; so do a cancelled study's."""
    fingerprint = _reasons_fingerprint(f"{reason.value}: {detail}", {}, {})
    if _reasons_current(cur, tenant_id=tenant_id, fingerprint=fingerprint):
        return
    table, studies = Run._meta.db_table, Study._meta.db_table
    cur.execute(
        f"UPDATE {table} r SET wait_reason = %(reason)s, wait_detail = %(detail)s"
        " WHERE r.tenant_id = %(tenant)s AND r.state = %(pending)s"
        " AND (r.retry_at IS NULL OR r.retry_at <= now())"
        " AND (r.wait_reason <> %(reason)s OR r.wait_detail <> %(detail)s)"
        f" AND r.study_id IN (SELECT s.id FROM {studies} s WHERE s.tenant_id = %(tenant)s"
        " AND s.state = ANY(%(active)s) AND NOT EXISTS (SELECT 1 FROM"
        f" {Image._meta.db_table} i WHERE i.id = s.image_id AND i.status <> %(ready)s))",
        {
            "reason": reason.value,
            "detail": detail[:200],
            "tenant": tenant_id,
            "pending": RunState.PENDING.value,
            "active": [str(s) for s in ACTIVE_STUDY_STATES],
            "ready": ImageStatus.READY.value,
        },
    )
    cur.execute(_REASONS_SAVE_SQL, [tenant_id, fingerprint])
