"""pending → admitted: the scheduler admitted runs within their tenant's quotas."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.utils import timezone

from studies.choices import RunState
from studies.events import publish_runs_taken
from studies.models import Run


def runs_admit(*, run_ids: list[Any], publish: bool = True, take_seqs: bool = False) -> int:
    """Admitted within quotas: they hold their resources from now on (a requeued run holds
    them again). In the caller's transaction; how many were still pending. With `publish`
    their events go out after commit; with `take_seqs` (and not `publish`) their event
    seqs are taken all the same, and the caller publishes them (publish_runs_taken)."""
    if not run_ids:
        return 0
    seqs = publish or take_seqs  # the events' seqs taken with the change
    with connection.cursor() as cur:
        cur.execute(
            _ADMIT_SQL + (", event_seq = event_seq + 1" if seqs else "") + _ADMIT_WHERE,
            [RunState.ADMITTED, timezone.now(), run_ids, RunState.PENDING],
        )
        count = cur.rowcount
    if publish:
        publish_runs_taken(run_ids)
    return count


_ADMIT_SQL = (
    f"UPDATE {Run._meta.db_table} SET state = %s, admitted_at = %s,"
    " released_at = NULL, retry_at = NULL,"  # a requeued run holds its resources again
    " wait_reason = '', wait_detail = ''"
)
_ADMIT_WHERE = " WHERE id = ANY(%s) AND state = %s"
