"""One error family for services, one handler that turns every error into JSON.

Every error body is `{"code": "...", "message": "...", "field": "..."|null, "details": ...}`.
"""

from __future__ import annotations

import enum
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError
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
    UNKNOWN_SERIES = "unknown_series"
    STATE = "invalid_state"
    STALE_ATTEMPT = "stale_attempt"
    RUN_ENDED = "run_ended"
    UNAUTHENTICATED = "not_authenticated"
    FORBIDDEN = "permission_denied"
    THROTTLED = "throttled"
    LENGTH_REQUIRED = "length_required"
    BODY_TOO_LARGE = "body_too_large"


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

    @property
    def headers(self) -> dict[str, str]:
        """HTTP headers the error's response carries."""
        return {}


class NotFound(ApplicationError):
    status = 404

    def __init__(self, message: str = "Not found.") -> None:
        super().__init__(message, code=ErrorCode.NOT_FOUND)


class Conflict(ApplicationError):
    status = 409


class Throttled(ApplicationError):
    """Too many attempts: a 429 whose Retry-After says in how many seconds to try again."""

    status = 429

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message, code=ErrorCode.THROTTLED)
        self.retry_after = max(int(retry_after), 1)

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class StaleAttempt(Conflict):
    """A report or step for a run attempt that is over: the caller (an agent) must stop."""

    def __init__(self) -> None:
        super().__init__("this attempt was superseded; stop", code=ErrorCode.STALE_ATTEMPT)


class RunEnded(Conflict):
    """A report or file for a run attempt whose agent's final report is in: the attempt's
    token opens nothing any more (the agent, told 409, stops)."""

    def __init__(self, state: str) -> None:
        super().__init__(
            f"this run attempt has ended ({state}) and its final report is in: the portal "
            "takes no more reports or files for it; stop",
            code=ErrorCode.RUN_ENDED,
        )


def _flatten(detail: Any, prefix: str = "") -> list[tuple[str | None, str]]:
    if isinstance(detail, dict):
        out: list[tuple[str | None, str]] = []
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if key == "non_field_errors":  # the object's own errors: named as the object
                name = prefix
            out.extend(_flatten(value, name))
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
    if isinstance(exc, DataError):
        exc = nul_refusal(exc, context) or exc
    if isinstance(exc, ApplicationError):
        return Response(
            error_body(exc.code, exc.message, exc.field, exc.details),
            status=exc.status,
            headers=exc.headers or None,
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
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else "error"
        response.data = error_body(code, str(exc.detail))
    return response


# --- NUL characters: PostgreSQL's text cannot hold them ----------------------------------

NUL = "\x00"


def nul_refusal(exc: DataError, context: dict[str, Any]) -> ApplicationError | None:
    """The error to answer when a NUL character from the request reached the database
    (psycopg refuses it before anything is sent): a 404 for a path lookup, a 400 naming the
    query parameter or body field otherwise. None when the request holds no NUL (the error
    is then the portal's own, a 500)."""
    if "NUL (0x00)" not in str(exc):
        return None
    for name, value in (context.get("kwargs") or {}).items():
        if isinstance(value, str) and NUL in value:
            return NotFound(f"Not found: the {name} in the path holds a NUL character (%00).")
    request = context.get("request")
    query = getattr(request, "query_params", None)
    for name, values in query.lists() if query is not None else ():
        if NUL in name or any(NUL in value for value in values):
            name = name.replace(NUL, "")
            return ApplicationError(
                f"the query parameter {name} holds a NUL character (%00), which no value "
                "here can hold; remove it",
                field=name,
            )
    field = _nul_field(getattr(request, "_full_data", None))
    if field is not None:
        return ApplicationError(
            f"{field or 'the request body'} holds a NUL character (\\u0000), which no text "
            "here can hold; remove it",
            field=field or None,
        )
    return None


def _nul_field(data: Any, limit: int = 100_000) -> str | None:
    """The path (a.b[2]) of the first text in a parsed body that holds a NUL, "" for the
    body itself, None when none does (looking at no more than `limit` values)."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack and limit > 0:
        limit -= 1
        path, value = stack.pop()
        if isinstance(value, str):
            if NUL in value:
                return path
        elif isinstance(value, dict):
            for key, item in reversed(list(value.items())):
                name = f"{path}.{key}" if path else str(key)
                if NUL in str(key):
                    return name.replace(NUL, "")
                stack.append((name, item))
        elif isinstance(value, list | tuple):
            stack.extend((f"{path}[{i}]", item) for i, item in reversed(list(enumerate(value))))
    return None
