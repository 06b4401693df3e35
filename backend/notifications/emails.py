"""E-mail notifications: the members' preferences, and one message per event and member,
sent through Django's mail settings (EMAIL_*; the console when no EMAIL_HOST is set)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import transaction
from django.template.loader import render_to_string
from django.utils import timezone

from core.exceptions import ApplicationError
from notifications.choices import SUBSCRIBABLE, EmailScope, EmailState, EventType
from notifications.models import EmailNotice, EmailPreference
from tenancy.models import Tenant

SUBJECTS = {
    EventType.STUDY_COMPLETED: "Study “{name}” completed",
    EventType.STUDY_COMPLETED_WITH_FAILURES: "Study “{name}” completed with failures",
    EventType.STUDY_CANCELLED: "Study “{name}” was cancelled",
    EventType.RUN_FAILED: "A run of “{name}” failed",
    EventType.RUN_DIVERGED: "A run of “{name}” diverged",
}


class EmailNotSent(Exception):
    """The mail server did not take a message (the task tries again)."""


@transaction.atomic
def email_preference_set(
    *,
    user: Any,
    tenant: Tenant,
    events: Sequence[str],
    scope: str = EmailScope.OWN,
    email: str | None = None,
) -> EmailPreference:
    """Which events the user is e-mailed about, for whose studies; `email` changes the
    account's address too."""
    known = [str(t) for t in SUBSCRIBABLE]
    unknown = [e for e in events if e not in known]
    if unknown:
        raise ApplicationError(
            f"unknown event(s) {', '.join(unknown)}; choose from {', '.join(known)}",
            field="events",
        )
    if email is not None and email != user.email:
        user.email = email
        user.save(update_fields=["email"])
    if events and not user.email:
        raise ApplicationError(
            "your account has no e-mail address to send to; give one in `email`",
            field="email",
        )
    preference, _ = EmailPreference.objects.update_or_create(
        user=user,
        tenant=tenant,
        defaults={"events": sorted(set(events), key=known.index), "scope": scope},
    )
    return preference


def email_notice_send(*, notice_id: int, final: bool = True) -> EmailNotice | None:
    """Send the e-mail once (a sent or failed notice is left alone). When the server refuses
    it: failed with its words if `final`, else EmailNotSent for the task to try again."""
    with transaction.atomic():
        notice = (
            EmailNotice.objects.select_for_update()
            .select_related("event", "user")
            .filter(pk=notice_id, state=EmailState.PENDING)
            .first()
        )
        if notice is None:
            return None
        message = email_message(notice=notice)
        try:
            message.send()
        except OSError as exc:  # smtplib's errors are OSErrors, as are refused connections
            notice.error = f"{type(exc).__name__}: {exc}"[:500]
            if not final:
                notice.save(update_fields=["error", "updated_at"])
                raise EmailNotSent(notice.error) from exc
            notice.state = EmailState.FAILED
            notice.save(update_fields=["state", "error", "updated_at"])
            return notice
        notice.state = EmailState.SENT
        notice.sent_at = timezone.now()
        notice.error = ""
        notice.save(update_fields=["state", "sent_at", "error", "updated_at"])
    return notice


def email_message(*, notice: EmailNotice) -> EmailMultiAlternatives:
    """The message of a notice: plain text and HTML, the study's numbers and its link."""
    event = notice.event
    study = event.data.get("study") or {}
    context = {
        "event": event,
        "type": event.get_type_display(),
        "study": study,
        "runs": study.get("runs") or {},
        "run": event.data.get("run"),
        "suppressed": event.data.get("run_events_suppressed") or 0,
        "user": notice.user,
        "settings_url": f"{str(settings.WINDTUNNEL['PUBLIC_URL']).rstrip('/')}"
        "/settings/notifications",
    }
    subject = "[Windtunnel] " + SUBJECTS.get(EventType(event.type), "{name}").format(
        name=study.get("name", "")
    )
    message = EmailMultiAlternatives(
        subject=subject,
        body=render_to_string("notifications/email.txt", context),
        to=[notice.address],
    )
    message.attach_alternative(render_to_string("notifications/email.html", context), "text/html")
    return message
