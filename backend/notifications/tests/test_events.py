"""A study's end and its runs' failures become events once, through the real transitions,
and reach the webhooks and the mailboxes that asked for them."""

from __future__ import annotations

import threading

from django.db import connection

from core import jobs
from core.jobs import Job
from notifications.events import study_ended_notify
from notifications.models import Delivery, EmailNotice, Event, StudyRunEvents
from notifications.tests.conftest import make_study, started, work
from notifications.webhooks import webhook_create
from studies import events as study_events
from studies import transitions
from studies.models import Run, Study
from studies.state import study_cancel, study_refresh_state


def _hook(api, url: str, events: list[str]):
    return webhook_create(tenant=api.tenant, user=api.tenant.user, url=url, events=events)


def _runs(study) -> list[Run]:
    return list(Run.objects.filter(study=study).order_by("index"))


def test_a_study_that_ends_sends_one_signed_event_to_its_webhook(api, published, receiver):
    webhook, receiver.secret = _hook(api, receiver.url, ["study.completed_with_failures"])
    study = make_study(api)
    first, second, third = (started(r) for r in _runs(study))
    transitions.run_end(run=first, state="completed", end_reason="success")
    transitions.run_end(run=second, state="failed", end_reason="exit_code", exit_code=1)
    transitions.run_stop_by_policy(run=third, outcome="diverged", detail="Courant 12 > 5")
    work(published)

    events = list(Event.objects.filter(study=study))
    assert [e.type for e in events] == ["study.completed_with_failures"]
    (request,) = receiver.requests
    assert request.signed
    assert request.headers["windtunnel-event"] == "study.completed_with_failures"
    body = request.json
    assert body["id"] == str(events[0].pk) and body["type"] == "study.completed_with_failures"
    numbers = body["data"]["study"]["runs"]
    assert (numbers["completed"], numbers["failed"], numbers["diverged"]) == (1, 2, 1)
    assert body["data"]["study"]["url"].endswith(f"/studies/{study.pk}")
    assert Delivery.objects.get(webhook=webhook).state == "delivered"

    # the study refreshed again (a late duplicate job): nothing more is sent
    study_refresh_state(study_id=study.pk)
    study_ended_notify(study_id=study.pk)
    work(published)
    assert Event.objects.filter(study=study).count() == 1 and len(receiver.requests) == 1


def test_a_cancelled_study_is_one_event(api, published, receiver):
    _, receiver.secret = _hook(api, receiver.url, ["study.cancelled", "study.completed"])
    study = make_study(api)
    study_cancel(study=study, by=api.tenant.user)
    work(published)
    assert [r.json["type"] for r in receiver.requests] == ["study.cancelled"]
    assert receiver.requests[0].json["data"]["study"]["runs"]["cancelled"] == 3


def test_concurrent_refreshes_of_an_ended_study_make_one_event(
    transactional_db, catalog, make_tenant, monkeypatch
):
    """Each of eight workers refreshes the study whose runs all ended at once (as the last
    runs' events ask): one wins the study's end, one event is made."""
    tenant = make_tenant()
    sent: list[tuple] = []
    lock = threading.Lock()

    def record(job, *args, **kwargs):
        with lock:
            sent.append((job, args))

    monkeypatch.setattr(jobs, "send", record)
    monkeypatch.setattr(study_events, "send", lambda group, message: None)
    monkeypatch.setattr(study_events, "send_many", lambda messages: None)

    class Api:  # make_study wants what the `api` fixture has
        pass

    holder = Api()
    holder.tenant = tenant  # type: ignore[attr-defined]
    study = make_study(holder)
    Run.objects.filter(study=study).update(state="completed", end_reason="success")
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def refresh() -> None:
        try:
            barrier.wait()
            study_refresh_state(study_id=study.pk)
            study_ended_notify(study_id=study.pk)  # the job itself, redelivered or not
        except BaseException as exc:  # noqa: BLE001 — reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=refresh) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert Study.objects.get(pk=study.pk).state == "completed"
    assert [j for j, _ in sent].count(Job.NOTIFY_STUDY_ENDED) == 1
    assert Event.objects.filter(study=study).count() == 1


def test_run_failures_are_events_only_for_subscribers_and_capped_per_study(
    api, published, receiver, settings
):
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "NOTIFY_RUN_EVENTS_PER_STUDY": 2}
    study = make_study(api, values=[1, 2, 3, 4])
    runs = [started(r) for r in _runs(study)]
    transitions.run_end(run=runs[0], state="failed", end_reason="exit_code", exit_code=1)
    work(published)
    assert not Event.objects.exists()  # nobody asked for run events: none made, none counted
    assert not StudyRunEvents.objects.exists()

    _, receiver.secret = _hook(api, receiver.url, ["run.failed", "run.diverged"])
    transitions.run_stop_by_policy(run=runs[1], outcome="diverged", detail="NaN in p")
    transitions.run_fail(run=runs[2], reason="agent_lost", message="no heartbeat")
    transitions.run_end(run=runs[3], state="failed", end_reason="exit_code", exit_code=2)
    work(published)
    assert [r.json["type"] for r in receiver.requests] == ["run.diverged", "run.failed"]
    assert all(r.signed for r in receiver.requests)
    run = receiver.requests[0].json["data"]["run"]
    assert run["id"] == str(runs[1].pk) and run["end_reason"] == "diverged"
    counter = StudyRunEvents.objects.get(study=study)
    assert (counter.sent, counter.suppressed) == (2, 1)


def test_study_end_is_emailed_through_a_real_smtp_server(api, published, smtp):
    user = api.tenant.user
    user.email = "ada@example.org"
    user.save()
    response = api.put(
        "/api/v1/notifications/email/",
        {"events": ["study.completed", "study.completed_with_failures"], "scope": "own"},
        format="json",
    )
    assert response.status_code == 200, response.content
    study = make_study(api, values=[1, 2])
    for run in _runs(study):
        transitions.run_end(run=started(run), state="completed", end_reason="success")
    work(published)

    (recipients, message) = smtp.messages[0]
    assert recipients == ["ada@example.org"] and len(smtp.messages) == 1
    assert message["Subject"].strip() == "[Windtunnel] Study “lid sweep” completed"
    parts = {
        p.get_content_type(): p.get_payload(decode=True).decode()
        for p in message.walk()
        if not p.is_multipart()
    }
    assert "completed: 2" in parts["text/plain"]
    assert f"/studies/{study.pk}" in parts["text/plain"]
    assert 'href="http' in parts["text/html"] and f"/studies/{study.pk}" in parts["text/html"]
    assert EmailNotice.objects.get().state == "sent"
