"""Sending a webhook delivery: one attempt at a time, each recorded in the delivery log.

A delivery is claimed with a conditional UPDATE (pending, or a sending one whose lease ran
out, and due), so two workers never send the same attempt. Any answer but a 2xx, and any
connection error or timeout, is tried again after WEBHOOK_RETRY_DELAYS (30 s, 2 min, 10 min,
1 h, 6 h by default); a 410 Gone turns the webhook off. Retries are not Celery countdowns
(the broker redelivers long ones): a retry is a `next_attempt_at` in PostgreSQL that the
periodic `notifications.deliver_due` picks up.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import ssl
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from core import crypto, jobs
from core.jobs import Job
from notifications.addresses import Address, allowed_addresses
from notifications.choices import DeliveryState, EventType
from notifications.events import event_body, event_fan_out
from notifications.models import Delivery, DeliveryAttempt, Event, Webhook
from notifications.signing import HEADER, signature_header

log = logging.getLogger(__name__)

USER_AGENT = "Windtunnel-Webhooks/1"
DUE_BATCH = 1000


@dataclass(frozen=True, kw_only=True)
class Outcome:
    status_code: int | None = None
    error: str = ""
    duration_ms: int = 0
    permanent: bool = False  # not worth a retry (an address the portal may not call)

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def webhook_secret(webhook: Webhook) -> str:
    """The webhook's signing secret, decrypted."""
    return str(crypto.decrypt_json(webhook.secret_encrypted)["secret"])


def delivery_attempt(*, delivery_id: Any) -> Delivery | None:
    """Send the delivery's next attempt if it is due and no one else is sending it; record
    the attempt and what follows (delivered, a retry at a time, or failed). None when there
    was nothing to send."""
    now = timezone.now()
    lease = timedelta(seconds=settings.WINDTUNNEL["WEBHOOK_TIMEOUT"] + 60)
    claimed = Delivery.objects.filter(
        pk=delivery_id,
        state__in=[DeliveryState.PENDING, DeliveryState.SENDING],
        next_attempt_at__lte=now,
    ).update(
        state=DeliveryState.SENDING,
        attempts=F("attempts") + 1,
        next_attempt_at=now + lease,
        updated_at=now,
    )
    if not claimed:
        return None
    delivery = Delivery.objects.select_related("webhook", "event").get(pk=delivery_id)
    webhook = delivery.webhook
    if not webhook.active:
        outcome = Outcome(error="not sent: the webhook is turned off", permanent=True)
    else:
        outcome = _send(webhook=webhook, delivery=delivery, event=delivery.event)
    _record(delivery=delivery, outcome=outcome)
    return delivery


def _send(*, webhook: Webhook, delivery: Delivery, event: Event) -> Outcome:
    parts = urlsplit(webhook.url)
    host = parts.hostname or ""
    addresses, problem = allowed_addresses(
        host, parts.port or (443 if parts.scheme == "https" else 80)
    )
    if problem:
        return Outcome(error=f"not sent: {problem}", permanent=True)
    body = event_body(event)
    timestamp = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Windtunnel-Event": event.type,
        "Windtunnel-Delivery": str(delivery.pk),
        HEADER: signature_header(secret=webhook_secret(webhook), timestamp=timestamp, body=body),
    }
    started = time.monotonic()
    try:
        status = post_to(webhook.url, addresses=addresses, body=body, headers=headers)
    except httpx.HTTPError as exc:
        return Outcome(error=failure(exc), duration_ms=_ms(started))
    if 300 <= status < 400:
        return Outcome(
            status_code=status,
            error="redirects are not followed; point the webhook at the final URL",
            duration_ms=_ms(started),
        )
    return Outcome(status_code=status, duration_ms=_ms(started))


def post_to(url: str, *, addresses: list[Address], body: bytes, headers: dict[str, str]) -> int:
    """POST the body; the answer's status code. Its body is never read: the delivery log
    keeps status codes, not what a receiver (or an address it hides) answers.

    With `addresses` (checked by notifications.addresses), the request goes to them, in
    order, and not to whatever the URL's name resolves to by now: the Host header and the
    TLS server name (certificate included) stay the URL's. The next address is tried only
    when no connection could be made (nothing was sent)."""
    target = httpx.URL(url)
    attempts = [
        (target.copy_with(host=str(address)), {**headers, "Host": target.netloc.decode()})
        for address in addresses
    ] or [(target, headers)]  # private addresses allowed: the URL as it is
    timeout = settings.WINDTUNNEL["WEBHOOK_TIMEOUT"]
    with httpx.Client(timeout=timeout, follow_redirects=False) as client:

        def status(to: httpx.URL, with_headers: dict[str, str]) -> int:
            with client.stream(
                "POST",
                to,
                content=body,
                headers=with_headers,
                extensions={"sni_hostname": target.host},
            ) as response:
                return response.status_code

        *others, last = attempts
        for to, with_headers in others:
            with contextlib.suppress(httpx.ConnectError):
                return status(to, with_headers)
        return status(*last)


def failure(exc: httpx.HTTPError) -> str:
    """What went wrong, in the log's own words: never the text of the exception, which can
    quote what the other end sent (an SSH banner in place of a status line, say)."""
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out after {settings.WINDTUNNEL['WEBHOOK_TIMEOUT']:g} s"
    if isinstance(exc, httpx.ConnectError):
        cause = exc.__cause__ or exc.__context__
        while cause is not None and not isinstance(cause, OSError):
            cause = cause.__cause__ or cause.__context__
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, ssl.SSLCertVerificationError):
            return "TLS: the receiver's certificate is not trusted or not for this host"
        if isinstance(cause, ssl.SSLError):
            return "TLS handshake failed"
        if isinstance(cause, socket.gaierror):
            return "the host does not resolve"
        if isinstance(cause, OSError) and cause.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return "no route to the receiver (network unreachable)"
        return "could not connect"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the receiver did not answer in HTTP (or closed the connection without an answer)"
    if isinstance(exc, httpx.ReadError | httpx.WriteError):
        return "the connection broke off"
    return f"the request failed ({type(exc).__name__})"


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _record(*, delivery: Delivery, outcome: Outcome) -> None:
    now = timezone.now()
    delays = settings.WINDTUNNEL["WEBHOOK_RETRY_DELAYS"]
    gone = outcome.status_code == 410
    next_at = None
    if outcome.ok:
        state = DeliveryState.DELIVERED
    elif gone or outcome.permanent or delivery.attempts >= delivery.max_attempts:
        state = DeliveryState.FAILED
    else:
        state = DeliveryState.PENDING
        next_at = now + timedelta(seconds=float(delays[min(delivery.attempts, len(delays)) - 1]))
    DeliveryAttempt.objects.create(
        delivery=delivery,
        number=delivery.attempts,
        status_code=outcome.status_code,
        error=outcome.error[:500],
        duration_ms=outcome.duration_ms,
        next_retry_at=next_at,
    )
    delivery.state = state
    delivery.next_attempt_at = next_at
    delivery.last_status_code = outcome.status_code
    delivery.delivered_at = now if outcome.ok else None
    delivery.save(
        update_fields=["state", "next_attempt_at", "last_status_code", "delivered_at", "updated_at"]
    )
    if gone:
        Webhook.objects.filter(pk=delivery.webhook_id).update(
            active=False,
            disabled_reason=(
                f"turned off on {now:%Y-%m-%d %H:%M} UTC: the receiver answered 410 Gone; "
                "turn it on again when it takes events"
            ),
            updated_at=now,
        )
    log.info(
        "webhook.attempt delivery=%s webhook=%s attempt=%s status=%s error=%r state=%s",
        delivery.pk,
        delivery.webhook_id,
        delivery.attempts,
        outcome.status_code,
        outcome.error,
        state,
    )


def deliveries_send_due(*, limit: int = DUE_BATCH) -> int:
    """Hand the worker the deliveries whose (re)try is due, and those whose worker died
    while sending (their lease ran out); how many."""
    ids = list(
        Delivery.objects.filter(
            state__in=[DeliveryState.PENDING, DeliveryState.SENDING],
            next_attempt_at__lte=timezone.now(),
        )
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:limit]
    )
    for pk in ids:
        jobs.send(Job.DELIVER_WEBHOOK, str(pk))
    return len(ids)


def webhook_ping(*, webhook: Webhook) -> Delivery:
    """Send a `ping` event to the webhook now, once (no retries): its delivery, with the
    attempt's status code or error, is the answer of the dashboard's test button."""
    event = Event.objects.create(
        tenant_id=webhook.tenant_id,
        type=EventType.PING,
        key=f"ping:{webhook.pk}:{time.time_ns()}",
        owner_id=webhook.owner_id,
        data={
            "webhook": {"id": str(webhook.pk), "url": webhook.url, "events": webhook.events},
            "message": "a test from Windtunnel: this webhook is reachable and its secret signs",
        },
    )
    (delivery,) = event_fan_out(event=event, webhooks=[webhook])
    delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    return delivery
