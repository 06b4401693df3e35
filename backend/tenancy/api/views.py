from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView

from core.exceptions import ApplicationError, ErrorCode
from tenancy.selectors import tenant_for_user, user_is_tenant_admin
from tenancy.services import api_token_create


class TokenRequestSerializer(serializers.Serializer):
    username = serializers.CharField()
    password = serializers.CharField(style={"input_type": "password"})
    name = serializers.CharField(required=False, default="api", max_length=100)


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="send as 'Authorization: Token <token>'; shown once")
    tenant = serializers.CharField()


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    tenant = serializers.CharField()
    is_admin = serializers.BooleanField()


class LoginThrottle(AnonRateThrottle):
    rate = "30/min"


class TokenView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes = [LoginThrottle]

    @extend_schema(request=TokenRequestSerializer, responses=TokenSerializer, auth=[])
    def post(self, request):
        ser = TokenRequestSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        user = authenticate(
            request,
            username=ser.validated_data["username"],
            password=ser.validated_data["password"],
        )
        if user is None:
            raise ApplicationError(
                "wrong username or password", code=ErrorCode.UNAUTHENTICATED, status=401
            )
        tenant = tenant_for_user(user=user)
        if tenant is None:
            raise ApplicationError(
                "this user belongs to no tenant; ask an admin to add you",
                code=ErrorCode.FORBIDDEN,
                status=403,
            )
        return Response(
            {
                "token": api_token_create(user=user, name=ser.validated_data["name"]),
                "tenant": tenant.name,
            }
        )


class MeView(APIView):
    @extend_schema(responses=MeSerializer)
    def get(self, request):
        tenant = tenant_for_user(user=request.user)
        return Response(
            {
                "username": request.user.username,
                "tenant": tenant.name,
                "is_admin": user_is_tenant_admin(user=request.user),
            }
        )
