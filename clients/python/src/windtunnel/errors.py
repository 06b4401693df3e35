"""The client's errors, and the exit code the command line answers for each.

Every error the portal answers is JSON with a code, a message that says what to change and
the field it is about (docs/api.md); `ApiError` carries them as they came.
"""

from __future__ import annotations

import enum
from typing import Any

import httpx


class ExitCode(enum.IntEnum):
    """What `windtunnel` exits with (docs/cli.md)."""

    OK = 0
    #: the study (or run) ended, and not every run completed: failed or cancelled runs
    FAILED = 1
    #: the command line was wrong: an unknown option, a file that cannot be read, a spec
    #: that is not YAML
    USAGE = 2
    #: no portal or token configured, or the portal refused them (401, 403)
    AUTH = 3
    #: the portal refused the request (400, 404, 409, 413, 429): its message says why
    API = 4
    #: the portal could not be reached, timed out or failed (5xx)
    UNAVAILABLE = 5
    #: interrupted (Ctrl-C); a study keeps running on the portal
    INTERRUPTED = 130


class WindtunnelError(Exception):
    """Anything the client reports to its user instead of a traceback."""

    exit_code: ExitCode = ExitCode.API

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def as_dict(self) -> dict[str, Any]:
        """The error as the command line prints it with --json."""
        return {"code": self.exit_code.name.lower(), "message": self.message}


class UsageError(WindtunnelError):
    """A local problem with what was asked: a file that cannot be read, a spec that is not
    YAML, an option that makes no sense."""

    exit_code = ExitCode.USAGE


class ConfigError(WindtunnelError):
    """No portal URL or no token to use."""

    exit_code = ExitCode.AUTH


class UnavailableError(WindtunnelError):
    """The portal could not be reached, did not answer in time, or failed (5xx)."""

    exit_code = ExitCode.UNAVAILABLE


class ApiError(WindtunnelError):
    """The portal refused a request: its `code`, `message` (what to change), `field` and
    `details`, and the HTTP `status`."""

    exit_code = ExitCode.API

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str = "error",
        field: str | None = None,
        details: Any = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.field = field
        self.details = details

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "field": self.field,
            "details": self.details,
            "status": self.status,
        }


class AuthError(ApiError):
    """The portal refused the credentials (401) or the operation to this user (403)."""

    exit_code = ExitCode.AUTH


class ServerError(ApiError):
    """The portal failed (5xx)."""

    exit_code = ExitCode.UNAVAILABLE


def error_from_response(response: httpx.Response) -> ApiError:
    """The error a non-2xx answer stands for, with the portal's own message."""
    status = response.status_code
    body: Any = None
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        code = str(body.get("code") or "error")
        message = body["message"]
        field = body.get("field") if isinstance(body.get("field"), str) else None
        details = body.get("details")
    else:
        code, field, details = "error", None, None
        text = response.text.strip().splitlines()[0][:200] if response.text.strip() else ""
        message = f"the portal answered {status} {response.reason_phrase}" + (
            f": {text}" if text else ""
        )
    if (
        status == 401
        and not response.request.url.path.endswith("/auth/token/")
        and "windtunnel login" not in message  # the portal's message says it already
    ):
        message += (
            " (sign in again with `windtunnel login URL`, or set WINDTUNNEL_TOKEN to a valid token)"
        )
    if status == 429 and "retry-after" in response.headers:
        details = (
            details if details is not None else {"retry_after": response.headers["retry-after"]}
        )
    kind: type[ApiError] = ApiError
    if status in (401, 403):
        kind = AuthError
    elif status >= 500:
        kind = ServerError
    return kind(message, status=status, code=code, field=field, details=details)
