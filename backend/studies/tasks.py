"""Thin, idempotent tasks: take ids, call one service."""

from celery import shared_task

from studies import events, services


@shared_task(name="studies.refresh_study", ignore_result=True)
def refresh_study(study_id: str) -> None:
    services.study_refresh_state(study_id=study_id)


@shared_task(name="studies.publish_runs", ignore_result=True)
def publish_runs(run_ids: list[str]) -> None:
    events.publish_runs_now(run_ids)
