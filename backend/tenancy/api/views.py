from django.contrib.auth import authenticate, login
from django.middleware.csrf import get_token
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import ensure_csrf_cookie
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from core.exceptions import ApplicationError, ErrorCode
from tenancy.models import ApiToken
from tenancy.selectors import tenant_for_user, user_is_tenant_admin
from tenancy.signout import sign_out
from tenancy.throttle import login_check, login_failed, login_succeeded
from tenancy.tokens import api_token_issue

# Django's User.username is at most 150 characters; a password longer than this is no one's
USERNAME_MAX = 150
PASSWORD_MAX = 4096


class TokenRequestSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=USERNAME_MAX)
    password = serializers.CharField(max_length=PASSWORD_MAX, style={"input_type": "password"})
    name = serializers.CharField(
        required=False,
        default="api",
        max_length=ApiToken.NAME_MAX,
        help_text="the token's name; signing in again with the same name replaces that token",
    )


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="send as 'Authorization: Token <token>'; shown once")
    tenant = serializers.CharField()


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    tenant = serializers.CharField()
    is_admin = serializers.BooleanField(help_text="admin of the tenant")
    is_staff = serializers.BooleanField(help_text="operator of the portal: sees the admin pages")


def _authenticate(request, *, username: str, password: str):
    """The user these credentials sign in, under the sign-in limits (tenancy.throttle: a 429
    with Retry-After when its address or username tried too often), or a 401."""
    login_check(request=request, username=username)
    user = authenticate(request, username=username, password=password)
    if user is None:
        login_failed(username=username)
        raise ApplicationError(
            "wrong username or password", code=ErrorCode.UNAUTHENTICATED, status=401
        )
    login_succeeded(username=username)
    return user


class TokenView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(request=TokenRequestSerializer, responses=TokenSerializer, auth=[])
    def post(self, request):
        ser = TokenRequestSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        user = _authenticate(
            request,
            username=ser.validated_data["username"],
            password=ser.validated_data["password"],
        )
        tenant = tenant_for_user(user=user)
        if tenant is None:
            raise ApplicationError(
                "this user belongs to no tenant; ask an admin to add you",
                code=ErrorCode.FORBIDDEN,
                status=403,
            )
        # one token per name: signing in again (a new laptop session, a CI job's login)
        # replaces the one of that name instead of adding another
        issued = api_token_issue(user=user, name=ser.validated_data["name"], replace=True)
        return Response({"token": issued.key, "tenant": tenant.name})


class MeView(APIView):
    @extend_schema(responses=MeSerializer)
    def get(self, request):
        return Response(_me(request.user))


def _me(user) -> dict:
    tenant = tenant_for_user(user=user)
    return {
        "username": user.username,
        "tenant": tenant.name if tenant else "",
        "is_admin": user_is_tenant_admin(user=user),
        "is_staff": bool(user.is_staff),
    }


# --- Session sign-in for the web UI -------------------------------------------------------
# The SPA first GETs /auth/csrf/ (sets the csrftoken cookie), then POSTs /auth/login/ with the
# X-CSRFToken header; afterwards DRF's SessionAuthentication authenticates (and CSRF-checks)
# every request. Scripts use API tokens instead (TokenView).


class LoginRequestSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=USERNAME_MAX)
    password = serializers.CharField(max_length=PASSWORD_MAX, style={"input_type": "password"})


class CsrfSerializer(serializers.Serializer):
    csrf_token = serializers.CharField(help_text="also set as the csrftoken cookie")


class _CsrfCheck(SessionAuthentication):
    """Enforce Django's CSRF check even for an anonymous request (login CSRF)."""

    def check(self, request) -> None:
        try:
            self.enforce_csrf(request)
        except exceptions.PermissionDenied as exc:
            raise ApplicationError(
                f"the sign-in form has expired or came from another site ({exc.detail}); "
                "reload the page and try again",
                code=ErrorCode.FORBIDDEN,
                status=403,
            ) from exc


class CsrfView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(responses=CsrfSerializer, auth=[])
    @method_decorator(ensure_csrf_cookie)
    def get(self, request):
        return Response({"csrf_token": get_token(request)})


class LoginView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(request=LoginRequestSerializer, responses=MeSerializer, auth=[])
    def post(self, request):
        _CsrfCheck().check(request)
        ser = LoginRequestSerializer(data=request.data)
        if not ser.is_valid():
            too_long = [
                f
                for f in ("username", "password")
                if any(getattr(e, "code", "") == "max_length" for e in ser.errors.get(f, []))
            ]
            if too_long:
                raise ApplicationError(
                    f"that {too_long[0]} is too long to be anyone's", field=too_long[0]
                )
            missing = [f for f in ("username", "password") if f in ser.errors]
            raise ApplicationError(
                f"enter your {' and '.join(missing)}" if missing else "invalid sign-in request",
                field=missing[0] if missing else None,
            )
        user = _authenticate(
            request,
            username=ser.validated_data["username"],
            password=ser.validated_data["password"],
        )
        if tenant_for_user(user=user) is None:
            raise ApplicationError(
                "this user belongs to no tenant; ask an admin to add you",
                code=ErrorCode.FORBIDDEN,
                status=403,
            )
        login(request._request, user)
        return Response(_me(user))


class LogoutView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(request=None, responses={204: None})
    def post(self, request):
        sign_out(request._request)  # its websockets closed too
        return Response(status=204)
