"""Webhooks, the events they carry, every delivery attempt, and e-mail preferences."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models

from core.models import PublicIdModel, TimeStamped
from notifications.choices import DeliveryState, EmailScope, EmailState, EventType, WebhookScope


class Webhook(PublicIdModel):
    """An HTTP endpoint that receives signed events: the tenant's (owner is None; its admins
    manage it, every study of the tenant) or a user's own (the studies that user owns)."""

    tenant = models.ForeignKey("tenancy.Tenant", on_delete=models.CASCADE, related_name="webhooks")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="webhooks",
        help_text="set for a personal webhook; empty for the tenant's",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    url = models.URLField(max_length=2000)
    description = models.CharField(max_length=200, blank=True)
    events = ArrayField(models.CharField(max_length=40, choices=EventType.choices))
    active = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=300, blank=True)
    # the signing secret, encrypted (core.crypto); only its first characters are shown again
    secret_encrypted = models.TextField()
    secret_prefix = models.CharField(max_length=16)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant", "active"], name="webhook_tenant_active")]

    def __str__(self) -> str:
        return self.url

    @property
    def scope(self) -> str:
        return WebhookScope.PERSONAL if self.owner_id else WebhookScope.TENANT


class Event(PublicIdModel):
    """Something that happened, once: the body every subscriber receives. `key` makes its
    creation idempotent (a study's end, a run's failure), so a redelivered job or two
    workers creating the same event make one."""

    tenant = models.ForeignKey("tenancy.Tenant", on_delete=models.CASCADE, related_name="+")
    type = models.CharField(max_length=40, choices=EventType.choices)
    key = models.CharField(max_length=200, unique=True)
    study = models.ForeignKey(
        "studies.Study", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="the study's owner (personal webhooks and e-mails on own studies)",
    )
    data = models.JSONField(default=dict)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.type} {self.key}"


class Delivery(PublicIdModel):
    """An event on its way to one webhook; its attempts are the delivery log."""

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="deliveries")
    state = models.CharField(
        max_length=16, choices=DeliveryState.choices, default=DeliveryState.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=1)
    next_attempt_at = models.DateTimeField(
        null=True, blank=True, help_text="when it is (re)tried; a sending delivery's lease"
    )
    last_status_code = models.IntegerField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["webhook", "event"], name="uniq_delivery")]
        indexes = [
            models.Index(fields=["state", "next_attempt_at"], name="delivery_due"),
            models.Index(fields=["webhook", "-created_at"], name="delivery_log"),
        ]

    def __str__(self) -> str:
        return f"{self.event.type} → {self.webhook_id} ({self.state})"


class DeliveryAttempt(TimeStamped):
    """One HTTP request of a delivery, as it went: its status code, or why it got none. What
    the receiver answered is not kept (an address behind the webhook could be one the tenant
    may not read)."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="log")
    number = models.PositiveIntegerField()
    status_code = models.IntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    next_retry_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["delivery", "number"]

    def __str__(self) -> str:
        return f"{self.delivery_id} #{self.number}: {self.status_code or self.error}"


class EmailPreference(TimeStamped):
    """Which events a user is e-mailed about, and for whose studies."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="email_preferences"
    )
    tenant = models.ForeignKey("tenancy.Tenant", on_delete=models.CASCADE, related_name="+")
    events = ArrayField(
        models.CharField(max_length=40, choices=EventType.choices), default=list, blank=True
    )
    scope = models.CharField(max_length=16, choices=EmailScope.choices, default=EmailScope.OWN)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant"], name="uniq_email_preference")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant}: {', '.join(self.events) or 'none'}"


class EmailNotice(TimeStamped):
    """One e-mail of an event to one user: sent at most once (a redelivered task finds it
    sent), with the error when the mail server refused it."""

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="emails")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    address = models.EmailField()
    state = models.CharField(max_length=16, choices=EmailState.choices, default=EmailState.PENDING)
    error = models.CharField(max_length=500, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["event", "user"], name="uniq_email_notice")]

    def __str__(self) -> str:
        return f"{self.event_id} → {self.address} ({self.state})"


class StudyRunEvents(models.Model):
    """How many run events a study has produced, and how many were left out past the cap
    (NOTIFY_RUN_EVENTS_PER_STUDY): a study of 100,000 failing runs sends a few, not all."""

    study = models.OneToOneField(
        "studies.Study", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    sent = models.PositiveIntegerField(default=0)
    suppressed = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.study_id}: {self.sent} sent, {self.suppressed} left out"
