"""Reads on notifications, always scoped to the requester's tenant (and to the requester for
personal webhooks: another user's, or another tenant's, answers 404)."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, Q, QuerySet

from core.exceptions import NotFound
from core.ids import parse_uuid
from notifications.choices import EmailScope
from notifications.models import Delivery, DeliveryAttempt, EmailPreference, Webhook
from tenancy.models import Membership, Tenant
from tenancy.selectors import user_is_tenant_admin


def webhooks_visible_to(*, user: Any, tenant: Tenant) -> QuerySet[Webhook]:
    """The user's personal webhooks, and the tenant's when the user is one of its admins."""
    mine = Q(owner_id=user.pk)
    if user_is_tenant_admin(user=user):
        mine |= Q(owner__isnull=True)
    return Webhook.objects.filter(mine, tenant=tenant).order_by("-created_at")


def webhook_get(*, user: Any, tenant: Tenant, webhook_id: Any) -> Webhook:
    pk = parse_uuid(webhook_id)
    webhook = webhooks_visible_to(user=user, tenant=tenant).filter(pk=pk).first() if pk else None
    if webhook is None:
        raise NotFound("No webhook with that id among yours (a tenant's webhooks are its admins').")
    return webhook


def deliveries_of(*, webhook: Webhook) -> QuerySet[Delivery]:
    """The webhook's delivery log, newest first, each with its attempts (two queries a page)."""
    return (
        Delivery.objects.filter(webhook=webhook)
        .select_related("event")
        .prefetch_related(Prefetch("log", queryset=DeliveryAttempt.objects.order_by("number")))
        .order_by("-created_at")
    )


def email_preference_of(*, user: Any, tenant: Tenant) -> EmailPreference:
    """The user's e-mail preference in the tenant (unsaved, with no events, if never set)."""
    found = EmailPreference.objects.filter(user_id=user.pk, tenant=tenant).first()
    return found or EmailPreference(user=user, tenant=tenant, events=[], scope=EmailScope.OWN)


def webhooks_subscribed(*, tenant_id: int, owner_id: Any, types: list[str]) -> QuerySet[Webhook]:
    """Active webhooks of the tenant that want any of `types` for a study of `owner_id`:
    the tenant's own, and the owner's personal ones."""
    whose = Q(owner__isnull=True)
    if owner_id is not None:
        whose |= Q(owner_id=owner_id)
    return Webhook.objects.filter(whose, tenant_id=tenant_id, active=True, events__overlap=types)


def email_subscribed(
    *, tenant_id: int, owner_id: Any, types: list[str]
) -> QuerySet[EmailPreference]:
    """Preferences of the tenant's members with an address that want any of `types` for a
    study of `owner_id` (theirs, or any when they asked for the tenant's)."""
    whose = Q(scope=EmailScope.TENANT)
    if owner_id is not None:
        whose |= Q(user_id=owner_id)
    members = Membership.objects.filter(tenant_id=tenant_id).values("user_id")
    return (
        EmailPreference.objects.filter(whose, tenant_id=tenant_id, events__overlap=types)
        .filter(user__in=members, user__is_active=True)
        .exclude(user__email="")
        .select_related("user")
    )
