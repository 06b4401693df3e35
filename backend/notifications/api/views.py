from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from notifications import delivery, emails, selectors, webhooks
from notifications.api import serializers as s
from notifications.models import Webhook
from tenancy.selectors import tenant_for_member


class WebhookViewSet(viewsets.GenericViewSet):
    """Webhooks: your personal ones (the studies you own), and the tenant's if you are one
    of its admins. docs/notifications.md has the payload, the headers and the signature."""

    queryset = Webhook.objects.none()  # for the schema; get_queryset() scopes it
    serializer_class = s.WebhookSerializer
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Webhook.objects.none()
        user = self.request.user
        return selectors.webhooks_visible_to(
            user=user, tenant=tenant_for_member(user=user)
        ).select_related("owner")

    def get_object(self) -> Webhook:
        user = self.request.user
        return selectors.webhook_get(
            user=user, tenant=tenant_for_member(user=user), webhook_id=self.kwargs["pk"]
        )

    @extend_schema(responses=s.WebhookSerializer(many=True))
    def list(self, request):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.WebhookSerializer(page, many=True).data)

    @extend_schema(request=s.WebhookCreateSerializer, responses={201: s.WebhookCreatedSerializer})
    def create(self, request):
        ser = s.WebhookCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        webhook, secret = webhooks.webhook_create(
            tenant=tenant_for_member(user=request.user), user=request.user, **ser.validated_data
        )
        body = {**s.WebhookSerializer(webhook).data, "secret": secret}  # shown this once
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(responses=s.WebhookSerializer)
    def retrieve(self, request, pk=None):
        return Response(s.WebhookSerializer(self.get_object()).data)

    @extend_schema(request=s.WebhookUpdateSerializer, responses=s.WebhookSerializer)
    def partial_update(self, request, pk=None):
        webhook = self.get_object()
        ser = s.WebhookUpdateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        webhook = webhooks.webhook_update(webhook=webhook, **ser.validated_data)
        return Response(s.WebhookSerializer(webhook).data)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        webhooks.webhook_delete(webhook=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses=s.DeliverySerializer)
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        """Send a `ping` event now, once: the delivery with its attempt (status code or
        error) is the answer, whatever the receiver said."""
        sent = delivery.webhook_ping(webhook=self.get_object())
        return Response(
            s.DeliverySerializer(selectors.deliveries_of(webhook=sent.webhook).get(pk=sent.pk)).data
        )

    @extend_schema(responses=s.DeliverySerializer(many=True))
    @action(detail=True, methods=["get"])
    def deliveries(self, request, pk=None):
        """The delivery log, newest first: each event sent and every attempt."""
        page = self.paginate_queryset(selectors.deliveries_of(webhook=self.get_object()))
        return self.get_paginated_response(s.DeliverySerializer(page, many=True).data)


class EmailPreferenceView(APIView):
    """Which events you are e-mailed about, for your studies or all of your tenant's."""

    @extend_schema(responses=s.EmailPreferenceSerializer)
    def get(self, request):
        tenant = tenant_for_member(user=request.user)
        preference = selectors.email_preference_of(user=request.user, tenant=tenant)
        return Response(s.EmailPreferenceSerializer(preference).data)

    @extend_schema(request=s.EmailPreferenceUpdateSerializer, responses=s.EmailPreferenceSerializer)
    def put(self, request):
        ser = s.EmailPreferenceUpdateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        preference = emails.email_preference_set(
            user=request.user, tenant=tenant_for_member(user=request.user), **ser.validated_data
        )
        return Response(s.EmailPreferenceSerializer(preference).data)
