from __future__ import annotations

from rest_framework import serializers

from notifications.choices import (
    SUBSCRIBABLE,
    SUBSCRIBABLE_CHOICES,
    DeliveryState,
    EmailScope,
    EventType,
    WebhookScope,
)
from notifications.models import Delivery, DeliveryAttempt, EmailPreference, Webhook

EVENT_CHOICES = SUBSCRIBABLE_CHOICES
EVENT_FIELD_HELP = "events to send: " + ", ".join(str(t) for t in SUBSCRIBABLE)


def _events_field(**kwargs) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.ChoiceField(
            choices=EVENT_CHOICES,
            error_messages={
                "invalid_choice": '"{input}" is not an event; choose from '
                + ", ".join(str(t) for t in SUBSCRIBABLE)
            },
        ),
        max_length=len(SUBSCRIBABLE),
        help_text=EVENT_FIELD_HELP,
        **kwargs,
    )


class WebhookCreateSerializer(serializers.Serializer):
    url = serializers.CharField(
        max_length=2000, help_text="http:// or https:// address that receives POSTed events"
    )
    events = _events_field(allow_empty=False)
    scope = serializers.ChoiceField(
        choices=WebhookScope.choices,
        default=WebhookScope.PERSONAL,
        help_text="personal: the studies you own; tenant: every study of the tenant (admins)",
    )
    description = serializers.CharField(
        max_length=200, required=False, default="", allow_blank=True
    )
    active = serializers.BooleanField(default=True)


class WebhookUpdateSerializer(serializers.Serializer):
    url = serializers.CharField(max_length=2000, required=False)
    events = _events_field(required=False, allow_empty=False)
    description = serializers.CharField(max_length=200, required=False, allow_blank=True)
    active = serializers.BooleanField(required=False)


class WebhookSerializer(serializers.ModelSerializer):
    scope = serializers.ChoiceField(choices=WebhookScope.choices, read_only=True)
    events = serializers.ListField(child=serializers.ChoiceField(choices=EVENT_CHOICES))
    owner = serializers.SerializerMethodField()
    secret_prefix = serializers.CharField(
        read_only=True, help_text="the secret's first characters, to tell secrets apart"
    )

    class Meta:
        model = Webhook
        fields = [
            "id",
            "url",
            "description",
            "events",
            "scope",
            "owner",
            "active",
            "disabled_reason",
            "secret_prefix",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_owner(self, webhook: Webhook) -> str | None:
        return webhook.owner.get_username() if webhook.owner else None


class WebhookCreatedSerializer(WebhookSerializer):
    secret = serializers.CharField(
        help_text="the signing secret (HMAC-SHA256 key of Windtunnel-Signature); shown once"
    )

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class DeliveryAttemptSerializer(serializers.ModelSerializer):
    class Meta:
        model = DeliveryAttempt
        fields = [
            "number",
            "created_at",
            "status_code",
            "error",
            "duration_ms",
            "next_retry_at",
        ]
        read_only_fields = fields


class DeliverySerializer(serializers.ModelSerializer):
    event_id = serializers.UUIDField(source="event.id", read_only=True)
    event_type = serializers.ChoiceField(
        source="event.type", choices=EventType.choices, read_only=True
    )
    state = serializers.ChoiceField(choices=DeliveryState.choices, read_only=True)
    attempts_log = DeliveryAttemptSerializer(source="log", many=True, read_only=True)

    class Meta:
        model = Delivery
        fields = [
            "id",
            "event_id",
            "event_type",
            "state",
            "attempts",
            "max_attempts",
            "next_attempt_at",
            "last_status_code",
            "delivered_at",
            "created_at",
            "attempts_log",
        ]
        read_only_fields = fields


class EmailPreferenceSerializer(serializers.ModelSerializer):
    email = serializers.EmailField(
        source="user.email", read_only=True, help_text="where the e-mails go (your account's)"
    )
    events = serializers.ListField(child=serializers.ChoiceField(choices=EVENT_CHOICES))
    scope = serializers.ChoiceField(choices=EmailScope.choices)

    class Meta:
        model = EmailPreference
        fields = ["email", "events", "scope"]
        read_only_fields = fields


class EmailPreferenceUpdateSerializer(serializers.Serializer):
    events = _events_field(allow_empty=True)
    scope = serializers.ChoiceField(choices=EmailScope.choices, default=EmailScope.OWN)
    email = serializers.EmailField(
        required=False, max_length=254, help_text="change your account's address too"
    )
