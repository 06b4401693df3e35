"""Writes on webhooks: create (its secret returned once), change, delete."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from core import crypto
from core.exceptions import ApplicationError, ErrorCode
from notifications.addresses import url_problem
from notifications.choices import SUBSCRIBABLE, WebhookScope
from notifications.models import Webhook
from notifications.signing import secret_generate
from tenancy.models import Tenant
from tenancy.selectors import user_is_tenant_admin

MAX_WEBHOOKS_PER_TENANT = 50


def _check_url(url: str) -> None:
    problem = url_problem(url)
    if problem:
        raise ApplicationError(problem, field="url")


def _check_events(events: Sequence[str]) -> list[str]:
    known = [str(t) for t in SUBSCRIBABLE]
    unknown = [e for e in events if e not in known]
    if unknown:
        raise ApplicationError(
            f"unknown event(s) {', '.join(unknown)}; choose from {', '.join(known)}",
            field="events",
        )
    if not events:
        raise ApplicationError(
            f"choose at least one event to send: {', '.join(known)}", field="events"
        )
    return sorted(set(events), key=known.index)


@transaction.atomic
def webhook_create(
    *,
    tenant: Tenant,
    user: Any,
    url: str,
    events: Sequence[str],
    scope: str = WebhookScope.PERSONAL,
    description: str = "",
    active: bool = True,
) -> tuple[Webhook, str]:
    """A new webhook and its signing secret (shown to the caller once, stored encrypted).
    A tenant's webhook (scope `tenant`, every study of the tenant) is its admins' to make."""
    if scope == WebhookScope.TENANT and not user_is_tenant_admin(user=user):
        raise ApplicationError(
            "only the tenant's admins can add a webhook for every study of the tenant; "
            "add a personal one (scope: personal) for the studies you own",
            code=ErrorCode.FORBIDDEN,
            field="scope",
            status=403,
        )
    _check_url(url)
    events = _check_events(events)
    # the tenant's row serialises concurrent creations, so the cap holds
    Tenant.objects.select_for_update().filter(pk=tenant.pk).first()
    if Webhook.objects.filter(tenant=tenant).count() >= MAX_WEBHOOKS_PER_TENANT:
        raise ApplicationError(
            f"this tenant has {MAX_WEBHOOKS_PER_TENANT} webhooks, the most it may have; "
            "delete one it no longer needs",
            code=ErrorCode.CONFLICT,
            status=409,
        )
    secret = secret_generate()
    webhook = Webhook.objects.create(
        tenant=tenant,
        owner=user if scope == WebhookScope.PERSONAL else None,
        created_by=user,
        url=url,
        description=description,
        events=events,
        active=active,
        secret_encrypted=crypto.encrypt_json({"secret": secret}),
        secret_prefix=secret[:10],
    )
    return webhook, secret


def webhook_update(
    *,
    webhook: Webhook,
    url: str | None = None,
    events: Sequence[str] | None = None,
    description: str | None = None,
    active: bool | None = None,
) -> Webhook:
    """Change what is given; turning a webhook on again clears why it was turned off."""
    if url is not None:
        _check_url(url)
        webhook.url = url
    if events is not None:
        webhook.events = _check_events(events)
    if description is not None:
        webhook.description = description
    if active is not None:
        webhook.active = active
        if active:
            webhook.disabled_reason = ""
    webhook.save()
    return webhook


def webhook_delete(*, webhook: Webhook) -> None:
    """The webhook and its delivery log go."""
    webhook.delete()
