"""Events, once each, and their fan-out to webhooks and e-mail.

A study's end comes as the job `notifications.study_ended` (studies.services enqueues it when
the study's refresh, under its row lock, sees it go from active to ended, or at a cancel);
runs that failed or diverged come as `notifications.runs_failed` (studies.transitions). Each
event has a unique `key` (the study and its end time; the run), so a redelivered job, or
two at once, make one event. Run events are made only when someone subscribed to them, and
at most NOTIFY_RUN_EVENTS_PER_STUDY per study: the rest are counted in the study's end event
(`data.run_events_suppressed`). docs/notifications.md.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import orjson
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count
from django.utils import timezone

from core import jobs
from core.jobs import Job
from notifications.choices import RUN_EVENTS, DeliveryState, EventType
from notifications.models import Delivery, EmailNotice, Event, StudyRunEvents, Webhook
from notifications.selectors import email_subscribed, webhooks_subscribed
from studies.choices import ENDED_STUDY_STATES, EndReason, RunState, StudyState
from studies.models import Run, Study

STUDY_EVENT = {
    StudyState.COMPLETED: EventType.STUDY_COMPLETED,
    StudyState.COMPLETED_WITH_FAILURES: EventType.STUDY_COMPLETED_WITH_FAILURES,
    StudyState.CANCELLED: EventType.STUDY_CANCELLED,
}
MESSAGE_EXCERPT = 500


def event_body(event: Event) -> bytes:
    """The JSON body every receiver of `event` gets (the same bytes on every retry)."""
    return orjson.dumps(
        {
            "id": str(event.pk),
            "type": event.type,
            "created": _iso(event.created_at),
            "data": event.data,
        }
    )


def study_ended_notify(*, study_id: Any) -> Event | None:
    """The event of the study's end, made and fanned out once (None when the study has not
    ended, or its end was told already)."""
    study = Study.objects.select_related("owner", "tenant").filter(pk=study_id).first()
    if study is None or study.state not in ENDED_STUDY_STATES or study.finished_at is None:
        return None
    key = f"study:{study.pk}:{_iso(study.finished_at)}"
    if Event.objects.filter(key=key).exists():
        return None
    suppressed = (
        StudyRunEvents.objects.filter(study_id=study.pk)
        .values_list("suppressed", flat=True)
        .first()
    )
    data = {"study": study_data(study), "run_events_suppressed": suppressed or 0}
    with transaction.atomic():
        try:
            with transaction.atomic():
                event = Event.objects.create(
                    tenant_id=study.tenant_id,
                    type=STUDY_EVENT[StudyState(study.state)],
                    key=key,
                    study=study,
                    owner_id=study.owner_id,
                    data=data,
                )
        except IntegrityError:  # another worker made it a moment ago
            return None
        event_fan_out(event=event)
    return event


def runs_failed_notify(*, run_ids: Iterable[Any]) -> list[Event]:
    """Events of runs that failed or diverged, for the studies whose subscribers asked for
    them, up to the per-study cap; the rest are counted (StudyRunEvents)."""
    runs = list(
        Run.objects.filter(pk__in=list(run_ids), state=RunState.FAILED)
        .select_related("study", "study__owner", "study__tenant")
        .order_by("study_id", "index")
    )
    by_study: dict[Any, list[Run]] = defaultdict(list)
    for run in runs:
        by_study[run.study_id].append(run)
    made: list[Event] = []
    for study_runs in by_study.values():
        made.extend(_study_runs_failed(study_runs))
    return made


def _study_runs_failed(runs: list[Run]) -> list[Event]:
    study = runs[0].study
    types = [str(t) for t in RUN_EVENTS]
    wanted: set[str] = set()
    for hook_events in webhooks_subscribed(
        tenant_id=study.tenant_id, owner_id=study.owner_id, types=types
    ).values_list("events", flat=True):
        wanted.update(hook_events)
    for pref_events in email_subscribed(
        tenant_id=study.tenant_id, owner_id=study.owner_id, types=types
    ).values_list("events", flat=True):
        wanted.update(pref_events)
    candidates = [(run, _run_event_type(run)) for run in runs]
    candidates = [(run, kind) for run, kind in candidates if kind in wanted]
    if not candidates:
        return []  # nobody listens: no event, nothing counted
    keys = {f"run:{run.pk}": (run, kind) for run, kind in candidates}
    told = set(Event.objects.filter(key__in=list(keys)).values_list("key", flat=True))
    fresh = [(key, run, kind) for key, (run, kind) in keys.items() if key not in told]
    if not fresh:
        return []
    cap = settings.WINDTUNNEL["NOTIFY_RUN_EVENTS_PER_STUDY"]
    made = []
    with transaction.atomic():
        StudyRunEvents.objects.bulk_create([StudyRunEvents(study=study)], ignore_conflicts=True)
        counter = StudyRunEvents.objects.select_for_update().get(study=study)
        room = max(cap - counter.sent, 0)
        sent, left_out = fresh[:room], fresh[room:]
        counter.sent += len(sent)
        counter.suppressed += len(left_out)
        counter.save(update_fields=["sent", "suppressed"])
        for key, run, kind in sent:
            try:
                with transaction.atomic():
                    event = Event.objects.create(
                        tenant_id=study.tenant_id,
                        type=kind,
                        key=key,
                        study=study,
                        owner_id=study.owner_id,
                        data={"study": study_summary(study), "run": run_data(run)},
                    )
            except IntegrityError:  # a redelivered job's twin made it a moment ago
                continue
            made.append(event)
        for event in made:
            event_fan_out(event=event)
    return made


def _run_event_type(run: Run) -> str:
    return str(
        EventType.RUN_DIVERGED if run.end_reason == EndReason.DIVERGED else EventType.RUN_FAILED
    )


def event_fan_out(*, event: Event, webhooks: Iterable[Webhook] | None = None) -> list[Delivery]:
    """A delivery for each webhook that wants `event` (or for `webhooks`) and an e-mail for
    each member who asked; each sent by the worker after commit."""
    if webhooks is None:
        webhooks = webhooks_subscribed(
            tenant_id=event.tenant_id, owner_id=event.owner_id, types=[event.type]
        )
    now = timezone.now()
    attempts = 1 + len(settings.WINDTUNNEL["WEBHOOK_RETRY_DELAYS"])
    deliveries = Delivery.objects.bulk_create(
        [
            Delivery(
                webhook=webhook,
                event=event,
                state=DeliveryState.PENDING,
                max_attempts=1 if event.type == EventType.PING else attempts,
                next_attempt_at=now,
            )
            for webhook in webhooks
        ]
    )
    for delivery in deliveries:
        if event.type != EventType.PING:  # a ping is sent by the request that asked for it
            jobs.enqueue(Job.DELIVER_WEBHOOK, str(delivery.pk))
    if event.type != EventType.PING:
        notices = EmailNotice.objects.bulk_create(
            [
                EmailNotice(event=event, user=pref.user, address=pref.user.email)
                for pref in email_subscribed(
                    tenant_id=event.tenant_id, owner_id=event.owner_id, types=[event.type]
                )
            ]
        )
        for notice in notices:
            jobs.enqueue(Job.SEND_EMAIL, notice.pk)
    return deliveries


# --- what an event says --------------------------------------------------------------------


def _base_url() -> str:
    return str(settings.WINDTUNNEL["PUBLIC_URL"]).rstrip("/")


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def study_summary(study: Study) -> dict[str, Any]:
    """Who a run event's study is: id, name, state and links."""
    return {
        "id": str(study.pk),
        "name": study.name,
        "state": study.state,
        "url": f"{_base_url()}/studies/{study.pk}",
        "api_url": f"{_base_url()}/api/v1/studies/{study.pk}/",
    }


def study_data(study: Study) -> dict[str, Any]:
    """A study's end: its numbers (runs by state, diverged among the failed), times, links."""
    runs: dict[str, int] = {str(s): 0 for s in RunState}
    diverged = 0
    rows = (
        Run.objects.filter(study=study)
        .order_by()
        .values_list("state", "end_reason")
        .annotate(n=Count("id"))
    )
    for state, end_reason, n in rows:
        runs[state] = runs.get(state, 0) + n
        if state == RunState.FAILED and end_reason == EndReason.DIVERGED:
            diverged += n
    return {
        **study_summary(study),
        "owner": study.owner.get_username() if study.owner else None,
        "tenant": study.tenant.name,
        "run_count": study.run_count,
        "runs": {**runs, "diverged": diverged},
        "submitted_at": _iso(study.submitted_at),
        "finished_at": _iso(study.finished_at),
    }


def run_data(run: Run) -> dict[str, Any]:
    return {
        "id": str(run.pk),
        "index": run.index,
        "parameters": run.parameters,
        "state": run.state,
        "end_reason": run.end_reason,
        "message": (run.message or "")[:MESSAGE_EXCERPT],
        "exit_code": run.exit_code,
        "attempt": run.attempt,
        "finished_at": _iso(run.finished_at),
        "url": f"{_base_url()}/runs/{run.pk}",
        "api_url": f"{_base_url()}/api/v1/runs/{run.pk}/",
    }
