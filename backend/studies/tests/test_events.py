"""Live run events: a run's own group hears of its changes only while someone follows the run;
the study's group hears of every change; the seqs are taken either way."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from core.live import redis_client, runs_watched, watch_key
from studies import events
from studies.models import Run
from studies.services import study_create


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, dict[str, Any]]]:
    """The messages handed to the courier (Redis still says who watches)."""
    messages: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(events, "send_many", messages.extend)
    monkeypatch.setattr(events, "send", lambda group, message: messages.append((group, message)))
    return messages


def test_a_runs_state_event_goes_to_its_group_only_while_it_is_watched(api, sent):
    study = study_create(
        tenant=api.tenant,
        owner=api.tenant.user,
        spec={"name": "w", "template": "cavity", "parameters": {"cells": [10, 20, 40]}},
        submit=True,
    )
    watched, *others = Run.objects.filter(study=study).order_by("index")
    redis_client().set(watch_key(watched.pk), 1, ex=30)
    try:
        assert runs_watched([str(r.pk) for r in (watched, *others)]) == {str(watched.pk)}
        before = dict(Run.objects.filter(study=study).values_list("pk", "event_seq"))
        sent.clear()
        events.publish_runs_now([str(r.pk) for r in (watched, *others)])
    finally:
        redis_client().delete(watch_key(watched.pk))
    run_events = [(group, m) for group, m in sent if m["type"] == "state"]
    assert [group for group, _ in run_events] == [f"run.{watched.pk}"]
    ((_, study_event),) = [(group, m) for group, m in sent if m["type"] == "runs"]
    assert {r["id"] for r in study_event["runs"]} == {str(r.pk) for r in (watched, *others)}
    after = dict(Run.objects.filter(study=study).values_list("pk", "event_seq"))
    assert all(after[pk] == seq + 1 for pk, seq in before.items())  # every seq taken


def test_runs_count_as_watched_when_redis_cannot_say(monkeypatch):
    class Unreachable:
        def mget(self, keys):
            raise redis.ConnectionError("down")

    monkeypatch.setattr("core.live.redis_client", Unreachable)
    assert runs_watched(["a", "b"]) == {"a", "b"}
