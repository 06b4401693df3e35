from django.db import models


class EventType(models.TextChoices):
    """What a webhook or an e-mail can be sent for (docs/notifications.md)."""

    STUDY_COMPLETED = "study.completed", "Study completed"
    STUDY_COMPLETED_WITH_FAILURES = (
        "study.completed_with_failures",
        "Study completed with failures",
    )
    STUDY_CANCELLED = "study.cancelled", "Study cancelled"
    RUN_FAILED = "run.failed", "Run failed"
    RUN_DIVERGED = "run.diverged", "Run diverged"
    PING = "ping", "Test (ping)"


# what a subscriber may choose (a ping goes only to the webhook being tested)
SUBSCRIBABLE = tuple(t for t in EventType if t != EventType.PING)
SUBSCRIBABLE_CHOICES = [(str(t), t.label) for t in SUBSCRIBABLE]
STUDY_EVENTS = (
    EventType.STUDY_COMPLETED,
    EventType.STUDY_COMPLETED_WITH_FAILURES,
    EventType.STUDY_CANCELLED,
)
RUN_EVENTS = (EventType.RUN_FAILED, EventType.RUN_DIVERGED)


class WebhookScope(models.TextChoices):
    PERSONAL = "personal", "Personal: the studies I own"
    TENANT = "tenant", "Tenant: every study of the tenant"


class EmailScope(models.TextChoices):
    OWN = "own", "Studies I own"
    TENANT = "tenant", "Every study of my tenant"


class DeliveryState(models.TextChoices):
    PENDING = "pending", "Pending"  # to be sent, or waiting for its next retry
    SENDING = "sending", "Sending"  # claimed by a worker (a lease until `next_attempt_at`)
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed"  # no retry left, or the receiver answered 410 Gone


class EmailState(models.TextChoices):
    PENDING = "pending", "Pending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"
