"""Thin, idempotent tasks: take ids, call one service."""

from celery import shared_task

from studies import services


@shared_task(name="studies.refresh_study", ignore_result=True)
def refresh_study(study_id: str) -> None:
    services.study_refresh_state(study_id=study_id)
