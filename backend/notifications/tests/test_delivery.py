"""Webhook deliveries against a real HTTP receiver on loopback: signed, retried with backoff,
every attempt in the delivery log."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from core.jobs import Job
from notifications import tasks
from notifications.delivery import deliveries_send_due, delivery_attempt
from notifications.models import Delivery, Webhook
from notifications.signing import signature_header, signature_verify
from notifications.tests.conftest import make_study
from notifications.tests.receivers import free_port
from notifications.webhooks import webhook_create
from studies.services import study_cancel
from studies.tasks import cancel_queued_runs


def _cancelled_study_delivery(api, url: str, published) -> tuple[Webhook, str, Delivery]:
    webhook, secret = webhook_create(
        tenant=api.tenant, user=api.tenant.user, url=url, events=["study.cancelled"]
    )
    study_cancel(study=make_study(api), by=api.tenant.user)
    for job, args, _ in published.jobs:  # the cancel's background half, then its end
        if job == Job.CANCEL_QUEUED_RUNS:
            cancel_queued_runs(*args)
    for job, args, _ in published.jobs:
        if job == Job.NOTIFY_STUDY_ENDED:
            tasks.study_ended(*args)
    return webhook, secret, Delivery.objects.get(webhook=webhook)


def test_a_500_is_retried_after_the_first_delay_and_both_attempts_are_logged(
    api, published, receiver, settings
):
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "WEBHOOK_RETRY_DELAYS": [30, 120]}
    receiver.statuses = [500, 200]
    webhook, receiver.secret, delivery = _cancelled_study_delivery(api, receiver.url, published)

    before = timezone.now()
    delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.last_status_code) == ("pending", 1, 500)
    retry_at = delivery.next_attempt_at
    assert retry_at is not None
    assert before + timedelta(seconds=29) < retry_at < timezone.now() + timedelta(seconds=31)
    assert delivery_attempt(delivery_id=delivery.pk) is None  # not due yet: nothing sent
    assert deliveries_send_due() == 0

    # the clock moves past the retry: the periodic sweep hands it to the worker
    Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    assert deliveries_send_due() == 1
    (job, args, _) = published.jobs[-1]
    assert job == Job.DELIVER_WEBHOOK
    tasks.deliver(*args)

    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.last_status_code) == ("delivered", 2, 200)
    first, second = delivery.log.order_by("number")
    assert (first.status_code, first.response_excerpt) == (500, "receiver says 500")
    assert first.next_retry_at is not None and second.next_retry_at is None
    assert second.status_code == 200 and second.duration_ms >= 0
    # both requests signed, the same event and delivery id, the same body
    assert [r.signed for r in receiver.requests] == [True, True]
    assert {r.headers["windtunnel-delivery"] for r in receiver.requests} == {str(delivery.pk)}
    assert receiver.requests[0].body == receiver.requests[1].body


def test_the_last_attempt_fails_the_delivery_and_a_410_turns_the_webhook_off(
    api, published, receiver, settings
):
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "WEBHOOK_RETRY_DELAYS": [30]}
    receiver.statuses = [410]
    webhook, receiver.secret, delivery = _cancelled_study_delivery(api, receiver.url, published)
    delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    webhook.refresh_from_db()
    assert delivery.state == "failed" and delivery.next_attempt_at is None
    assert not webhook.active and "410 Gone" in webhook.disabled_reason


def test_a_refused_connection_is_logged_and_retried_until_none_is_left(api, published, settings):
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "WEBHOOK_RETRY_DELAYS": [30]}
    url = f"http://127.0.0.1:{free_port()}/nobody-listens"
    _, _, delivery = _cancelled_study_delivery(api, url, published)
    delivery_attempt(delivery_id=delivery.pk)
    Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts) == ("failed", 2)
    errors = [a.error for a in delivery.log.order_by("number")]
    assert all("ConnectError" in e for e in errors), errors


def test_a_private_address_is_not_called_when_private_addresses_are_refused(
    api, published, receiver, settings
):
    webhook, _, delivery = _cancelled_study_delivery(api, receiver.url, published)
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "WEBHOOK_ALLOW_PRIVATE": False}
    delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert delivery.state == "failed" and not receiver.requests
    assert "private" in delivery.log.get().error


def test_a_signature_verifies_only_with_its_secret_body_and_a_recent_time():
    header = signature_header(secret="whsec_a", timestamp=1_700_000_000, body=b'{"x":1}')
    now = 1_700_000_100
    assert signature_verify(secret="whsec_a", header=header, body=b'{"x":1}', now=now)
    assert not signature_verify(secret="whsec_b", header=header, body=b'{"x":1}', now=now)
    assert not signature_verify(secret="whsec_a", header=header, body=b'{"x":2}', now=now)
    assert not signature_verify(secret="whsec_a", header=header, body=b'{"x":1}', now=now + 900)
