"""Thin, idempotent tasks: take ids, call one service (docs/notifications.md)."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from notifications.delivery import deliveries_send_due, delivery_attempt
from notifications.emails import EmailNotSent, email_notice_send
from notifications.events import runs_failed_notify, study_ended_notify
from orchestration.backoff import backoff_delay

EMAIL_RETRIES = 3
EMAIL_RETRY_CAP = 240.0  # 1, 2, 4 min: under the broker's visibility timeout


@shared_task(name="notifications.study_ended", ignore_result=True)
def study_ended(study_id: str) -> None:
    study_ended_notify(study_id=study_id)


@shared_task(name="notifications.runs_failed", ignore_result=True)
def runs_failed(run_ids: list[str]) -> None:
    runs_failed_notify(run_ids=run_ids)


@shared_task(name="notifications.deliver", ignore_result=True)
def deliver(delivery_id: str) -> None:
    delivery_attempt(delivery_id=delivery_id)


@shared_task(name="notifications.deliver_due", ignore_result=True)
def deliver_due() -> None:
    deliveries_send_due()


@shared_task(name="notifications.send_email", bind=True, ignore_result=True)
def send_email(self: Any, notice_id: int) -> None:
    """Its retries (1, 2, 4 min) stay under the broker's visibility timeout."""
    try:
        email_notice_send(notice_id=notice_id, final=self.request.retries >= EMAIL_RETRIES)
    except EmailNotSent as exc:
        raise self.retry(
            countdown=backoff_delay(self.request.retries + 1, first=60.0, cap=EMAIL_RETRY_CAP),
            exc=exc,
        ) from exc
