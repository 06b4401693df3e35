"""One error family for services, one handler that turns every error into JSON.

Every error body is `{"code": "...", "message": "...", "field": "..."|null, "details": ...}`.
"""

from __future__ import annotations

import enum
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions as drf
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_handler


class ErrorCode(enum.StrEnum):
    INVALID = "invalid"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    QUOTA = "quota_exceeded"
    BACKEND_CAPACITY = "backend_capacity"
    BACKEND_UNAVAILABLE = "backend_unavailable"
    TOO_MANY_RUNS = "too_many_runs"
    EMPTY_SPACE = "empty_parameter_space"
    EXPRESSION = "invalid_expression"
    UPLOAD = "invalid_upload"
    STATE = "invalid_state"
    STALE_ATTEMPT = "stale_attempt"
    UNAUTHENTICATED = "not_authenticated"
    FORBIDDEN = "permission_denied"


class ApplicationError(Exception):
    """A service refused an operation; the message tells the user what to change."""

    status = 400

    def __init__(
        self,
        message: str,
        *,
        code: ErrorCode = ErrorCode.INVALID,
        field: str | None = None,
        details: Any = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.field = field
        self.details = details
        if status is not None:
            self.status = status


class NotFound(ApplicationError):
    status = 404

    def __init__(self, message: str = "Not found.") -> None:
        super().__init__(message, code=ErrorCode.NOT_FOUND)


class Conflict(ApplicationError):
    status = 409


def _flatten(detail: Any, prefix: str = "") -> list[tuple[str | None, str]]:
    if isinstance(detail, dict):
        out: list[tuple[str | None, str]] = []
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if key == "non_field_errors":
                name = prefix or None
            out.extend(_flatten(value, name or ""))
        return out
    if isinstance(detail, list):
        out = []
        for i, value in enumerate(detail):
            name = prefix if not isinstance(value, dict | list) else f"{prefix}[{i}]"
            out.extend(_flatten(value, name))
        return out
    return [(prefix or None, str(detail))]


def error_body(
    code: str, message: str, field: str | None = None, details: Any = None
) -> dict[str, Any]:
    return {"code": str(code), "message": message, "field": field, "details": details}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApplicationError):
        return Response(
            error_body(exc.code, exc.message, exc.field, exc.details), status=exc.status
        )
    if isinstance(exc, DjangoValidationError):
        exc = drf.ValidationError(getattr(exc, "message_dict", None) or exc.messages)
    if isinstance(exc, Http404):
        exc = drf.NotFound()
    if isinstance(exc, PermissionDenied):
        exc = drf.PermissionDenied()
    response = drf_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, drf.ValidationError):
        problems = _flatten(exc.detail)
        field, message = problems[0] if problems else (None, "Invalid input.")
        text = f"{field}: {message}" if field else message
        if len(problems) > 1:
            text += f" (and {len(problems) - 1} more problem(s), see details)"
        response.data = error_body(ErrorCode.INVALID, text, field, exc.detail)
    elif isinstance(exc, drf.APIException):
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else "error"
        response.data = error_body(code, str(exc.detail))
    return response
