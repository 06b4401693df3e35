"""A user is told when a study ends: a webhook made through the API, a real study on the
real stack (uvicorn, the Celery worker, the run agent, OpenFOAM), and a signed POST that
reaches a real HTTP receiver on loopback."""

from __future__ import annotations

import pytest

from core.testing import wait_for
from notifications.tests.receivers import HttpReceiver

pytestmark = [pytest.mark.solver, pytest.mark.slow]


def test_a_study_that_ends_reaches_the_users_webhook_signed_once(live):
    receiver = HttpReceiver(statuses=[200]).start()
    try:
        made = live.post(
            "/api/v1/notifications/webhooks/",
            json={"url": receiver.url, "events": ["study.completed", "study.cancelled"]},
        )
        assert made.status_code == 201, made.text
        receiver.secret = made.json()["secret"]

        r = live.post(
            "/api/v1/studies/",
            json={
                "name": "told when done",
                "template": "cavity",
                "parameters": {"lid_velocity": {"values": [1]}},
            },
        )
        assert r.status_code == 201, r.text
        study_id = r.json()["id"]

        (request,) = wait_for(
            lambda: receiver.requests or None, timeout=300, what="the study's webhook"
        )
        assert request.signed, request.headers
        assert request.headers["windtunnel-event"] == "study.completed"
        body = request.json
        assert body["type"] == "study.completed"
        assert body["data"]["study"]["id"] == study_id
        assert body["data"]["study"]["runs"]["completed"] == 1
        assert live.get(f"/api/v1/studies/{study_id}/").json()["state"] == "completed"

        deliveries = live.get(
            f"/api/v1/notifications/webhooks/{made.json()['id']}/deliveries/"
        ).json()
        rows = deliveries["results"] if isinstance(deliveries, dict) else deliveries
        assert [(row["event_type"], row["state"], row["last_status_code"]) for row in rows] == [
            ("study.completed", "delivered", 200)
        ]
        assert [a["status_code"] for a in rows[0]["attempts_log"]] == [200]
    finally:
        receiver.stop()
    assert len(receiver.requests) == 1  # one study, one event
