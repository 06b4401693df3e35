"""The signed-in user's API tokens (session or token auth; another user's token is a 404).

GET     /api/v1/tokens/        yours: name, prefix, made, last used, expiry (never the key)
POST    /api/v1/tokens/        a new one: the key, shown once
DELETE  /api/v1/tokens/{id}/   revoke it
"""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from tenancy.models import ApiToken
from tenancy.selectors import api_token_list
from tenancy.tokens import (
    TOKEN_MAX_DAYS,
    api_token_expiry,
    api_token_issue,
    api_token_revoke,
)


class ApiTokenSerializer(serializers.ModelSerializer):
    prefix = serializers.CharField(
        source="key_prefix", help_text="the key's first characters, to tell tokens apart"
    )
    expired = serializers.SerializerMethodField(help_text="it opens nothing any more")

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "last_used_at", "expires_at", "expired"]
        read_only_fields = fields
        extra_kwargs = {"expires_at": {"help_text": "null: it does not expire"}}

    def get_expired(self, token: ApiToken) -> bool:
        return token.expired(self.context["now"])


class NewApiTokenSerializer(ApiTokenSerializer):
    """A new token's answer (the schema's): its record and, this once, its key."""

    key = serializers.CharField(
        help_text="send as 'Authorization: Token <key>'; shown this once, only its hash is kept"
    )

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "key"]


class ApiTokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(
        max_length=ApiToken.NAME_MAX, help_text="yours to choose; unique among your tokens"
    )
    expires_in_days = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=TOKEN_MAX_DAYS,
        help_text=f"1 to {TOKEN_MAX_DAYS}; leave out (with expires_at) for no expiry",
        error_messages={
            "min_value": "at least {min_value} day",
            "max_value": "at most {max_value} days: make a new token after a year",
        },
    )
    expires_at = serializers.DateTimeField(
        required=False,
        allow_null=True,
        help_text=f"instead of expires_in_days: a moment at most {TOKEN_MAX_DAYS} days ahead",
    )


class ApiTokenListView(APIView):
    @extend_schema(operation_id="tokens", responses=ApiTokenSerializer(many=True))
    def get(self, request):
        tokens = api_token_list(user=request.user)
        return Response(ApiTokenSerializer(tokens, many=True, context={"now": timezone.now()}).data)

    @extend_schema(
        operation_id="token_create",
        request=ApiTokenCreateSerializer,
        responses={201: NewApiTokenSerializer},
    )
    def post(self, request):
        ser = ApiTokenCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        issued = api_token_issue(
            user=request.user,
            name=data["name"],
            expires_at=api_token_expiry(
                expires_in_days=data.get("expires_in_days"), expires_at=data.get("expires_at")
            ),
        )
        record = ApiTokenSerializer(issued.token, context={"now": timezone.now()}).data
        return Response({**record, "key": issued.key}, status=status.HTTP_201_CREATED)


class ApiTokenDetailView(APIView):
    @extend_schema(
        operation_id="token_revoke",
        parameters=[OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH)],
        request=None,
        responses={204: None},
    )
    def delete(self, request, pk: str):
        api_token_revoke(user=request.user, token_id=pk)
        return Response(status=status.HTTP_204_NO_CONTENT)
