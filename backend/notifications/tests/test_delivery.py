"""Webhook deliveries against a real HTTP receiver on loopback: signed, retried with backoff,
every attempt in the delivery log."""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
import threading
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.utils import timezone

from core.jobs import Job
from notifications import tasks
from notifications.api.serializers import DeliverySerializer
from notifications.delivery import deliveries_send_due, delivery_attempt, failure, post_to
from notifications.models import Delivery, Webhook
from notifications.signing import signature_header, signature_verify
from notifications.tests.conftest import make_study
from notifications.tests.receivers import HttpReceiver, free_port
from notifications.webhooks import webhook_create
from studies.state import study_cancel
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
    assert (first.status_code, first.error) == (500, "")
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
    assert errors == ["connection refused", "connection refused"]


def test_a_private_address_is_not_called_when_private_addresses_are_refused(
    api, published, receiver, settings
):
    webhook, _, delivery = _cancelled_study_delivery(api, receiver.url, published)
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "WEBHOOK_ALLOW_PRIVATE": False}
    delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert delivery.state == "failed" and not receiver.requests
    assert "private" in delivery.log.get().error


def test_a_receiver_that_does_not_answer_in_http_cannot_show_what_it_said(api, published):
    """An internal service that is not HTTP (an SSH server, a database) greets the portal's
    request with its banner: the delivery log says the answer was not HTTP, not the banner."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def greet() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"SSH-2.0-OpenSSH_9.2 internal-db-7f3e\r\nkey: value\r\n\r\n")

    thread = threading.Thread(target=greet, daemon=True)
    thread.start()
    _, _, delivery = _cancelled_study_delivery(api, f"http://127.0.0.1:{port}/hook", published)
    delivery_attempt(delivery_id=delivery.pk)
    thread.join(timeout=10)
    server.close()
    (attempt,) = delivery.log.all()
    assert attempt.status_code is None
    assert attempt.error == (
        "the receiver did not answer in HTTP (or closed the connection without an answer)"
    )
    assert "internal-db-7f3e" not in json.dumps(DeliverySerializer(delivery).data)


def test_a_delivery_connects_to_the_address_that_was_checked(receiver):
    """The address checked is the address connected to: the URL's name is not looked up
    again (`.test` names never resolve), and the receiver still sees it as the Host."""
    port = receiver.server.server_address[1]
    status = post_to(
        f"http://hooks.windtunnel.test:{port}/hooks/windtunnel",
        addresses=[ipaddress.ip_address("127.0.0.1")],
        body=b"{}",
        headers={"Content-Type": "application/json"},
    )
    assert status == 200
    (request,) = receiver.requests
    assert request.headers["host"] == f"hooks.windtunnel.test:{port}"


def test_https_to_a_checked_address_keeps_the_urls_name_for_tls(tmp_path, monkeypatch):
    """Over HTTPS the receiver is asked for the URL's name (SNI) and its certificate must be
    for that name, though the connection goes to the checked address."""
    name = "hooks.windtunnel.test"
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=1))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server_names: list[str | None] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    context.sni_callback = lambda _socket, server_name, _context: server_names.append(server_name)
    receiver = HttpReceiver().start()
    receiver.server.socket = context.wrap_socket(receiver.server.socket, server_side=True)
    url = f"https://{name}:{receiver.server.server_address[1]}/hooks/windtunnel"
    loopback = [ipaddress.ip_address("127.0.0.1")]
    try:
        # a certificate no one vouches for: refused, and said so in the log's words
        with pytest.raises(httpx.ConnectError) as refused:
            post_to(url, addresses=loopback, body=b"{}", headers={})
        assert failure(refused.value) == (
            "TLS: the receiver's certificate is not trusted or not for this host"
        )
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))  # now it is trusted
        assert post_to(url, addresses=loopback, body=b"{}", headers={}) == 200
    finally:
        receiver.stop()
    assert server_names == [name, name]
    assert receiver.requests[0].headers["host"] == url.split("/")[2]


def test_the_next_checked_address_is_tried_when_one_cannot_be_reached(receiver):
    port = receiver.server.server_address[1]
    status = post_to(
        f"http://hooks.windtunnel.test:{port}/hooks/windtunnel",
        addresses=[ipaddress.ip_address("::1"), ipaddress.ip_address("127.0.0.1")],
        body=b"{}",
        headers={},
    )
    assert status == 200 and len(receiver.requests) == 1  # ::1 refused: nothing listens there


def test_a_signature_verifies_only_with_its_secret_body_and_a_recent_time():
    header = signature_header(secret="whsec_a", timestamp=1_700_000_000, body=b'{"x":1}')
    now = 1_700_000_100
    assert signature_verify(secret="whsec_a", header=header, body=b'{"x":1}', now=now)
    assert not signature_verify(secret="whsec_b", header=header, body=b'{"x":1}', now=now)
    assert not signature_verify(secret="whsec_a", header=header, body=b'{"x":2}', now=now)
    assert not signature_verify(secret="whsec_a", header=header, body=b'{"x":1}', now=now + 900)
