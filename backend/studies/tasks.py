"""Thin, idempotent tasks: take ids, call one service."""

from celery import shared_task

from core.runtime import in_background
from studies import batches, deletion, events, state

BULK_PUBLISH = 1000  # runs whose events one job sends, from which it works at low priority


@shared_task(name="studies.refresh_study", ignore_result=True)
def refresh_study(study_id: str) -> None:
    state.study_refresh_state(study_id=study_id)


@shared_task(name="studies.publish_runs", ignore_result=True)
def publish_runs(run_ids: list[str]) -> None:
    if len(run_ids) >= BULK_PUBLISH:  # a bulk change's (a large study cancelled): in the background
        in_background(lambda: events.publish_runs_now(run_ids))
    else:
        events.publish_runs_now(run_ids)


@shared_task(name="studies.cancel_queued_runs", ignore_result=True)
def cancel_queued_runs(study_id: str, who: str = "the system") -> None:
    in_background(lambda: state.study_cancel_queued(study_id=study_id, who=who))


@shared_task(name="studies.delete_study", ignore_result=True)
def delete_study(study_id: str) -> None:
    in_background(lambda: deletion.study_delete_rows(study_id=study_id))


@shared_task(name="studies.next_batch", ignore_result=True)
def next_batch(study_id: str, after: int = 0) -> None:
    batches.adaptive_next_batch(study_id=study_id, after=after)
