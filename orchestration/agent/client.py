"""The portal's ingest API over urllib (stdlib only)."""

from __future__ import annotations

import json
import math
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "Backoff",
    "PortalClient",
    "PortalError",
    "StaleAttempt",
    "TransientError",
    "json_safe",
    "with_retries",
]

T = TypeVar("T")

try:  # optional: several times faster on big telemetry batches; VMs may have only the stdlib
    import orjson

    def _dumps(body: dict[str, Any]) -> bytes:
        return orjson.dumps(body)  # non-finite floats never get here (json_safe)

except ImportError:  # pragma: no cover - exercised where orjson is not installed

    def _dumps(body: dict[str, Any]) -> bytes:
        return json.dumps(body, allow_nan=False).encode()


class StaleAttempt(Exception):
    """409: this attempt was superseded; stop at once, report nothing more."""


class TransientError(Exception):
    """Network error, timeout, 5xx or 429: try again later."""


class PortalError(Exception):
    """Any other refusal (4xx): retrying the same call will not help."""


def json_safe(value: float) -> float | str:
    """JSON has no NaN/Infinity: send them as the strings "NaN", "Infinity", "-Infinity"."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


class PortalClient:
    def __init__(
        self, *, portal_url: str, run_id: str, token: str, attempt: int, timeout: float = 15.0
    ) -> None:
        quoted = urllib.parse.quote(run_id, safe="")
        self.base = f"{portal_url.rstrip('/')}/api/v1/ingest/runs/{quoted}/"
        self.attempt = attempt
        self.timeout = timeout
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        payload = _dumps({"attempt": self.attempt, **body})
        request = urllib.request.Request(
            self.base + path,
            data=payload,
            method="POST",
            headers={**self._headers, "Content-Type": "application/json"},
        )
        return self._send(request)

    def put_file(self, path: str, file: Path, *, content_type: str) -> dict[str, Any]:
        url = f"{self.base}{path}?attempt={self.attempt}"
        with open(file, "rb") as fh:
            request = urllib.request.Request(
                url,
                data=fh,
                method="PUT",
                headers={
                    **self._headers,
                    "Content-Type": content_type,
                    "Content-Length": str(Path(file).stat().st_size),
                },
            )
            return self._send(request)

    def get_file(self, path: str, dest: Path, *, max_bytes: int) -> int:
        """GET `path` into `dest` (at most `max_bytes`); the number of bytes written."""
        url = f"{self.base}{path}?attempt={self.attempt}"
        request = urllib.request.Request(url, method="GET", headers=self._headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                size = 0
                with open(dest, "wb") as fh:
                    while chunk := response.read(1 << 20):
                        size += len(chunk)
                        if size > max_bytes:
                            raise PortalError(f"{url}: more than {max_bytes} bytes")
                        fh.write(chunk)
                return size
        except urllib.error.HTTPError as exc:
            self._raise_for(exc, url)
            raise  # unreachable: _raise_for always raises
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            raise TransientError(f"{url}: {exc}") from None

    @staticmethod
    def _raise_for(exc: urllib.error.HTTPError, url: str) -> None:
        body = _decode(exc.read() or b"")
        if exc.code == 409:
            raise StaleAttempt(str(body.get("code", "stale_attempt"))) from None
        if exc.code >= 500 or exc.code in (408, 429):
            raise TransientError(f"HTTP {exc.code} from {url}") from None
        raise PortalError(f"HTTP {exc.code} from {url}: {body}") from None

    def _send(self, request: urllib.request.Request) -> dict[str, Any]:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return _decode(response.read())
        except urllib.error.HTTPError as exc:
            self._raise_for(exc, request.full_url)
            raise  # unreachable
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            raise TransientError(f"{request.full_url}: {exc}") from None


def _decode(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class Backoff:
    """0.5 s doubling to 10 s; `reset()` after a success."""

    def __init__(self, *, first: float = 0.5, cap: float = 10.0) -> None:
        self.first, self.cap = first, cap
        self.delay = first

    def next(self) -> float:
        delay = self.delay
        self.delay = min(self.delay * 2, self.cap)
        return delay

    def reset(self) -> None:
        self.delay = self.first


def with_retries(
    call: Callable[[], T],
    *,
    deadline: float,
    what: str,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Any] = time.sleep,
) -> T:
    """Run `call`, retrying TransientError with backoff until `deadline` (monotonic).

    StaleAttempt and PortalError propagate at once; the last TransientError propagates
    when the deadline passes.
    """
    backoff = Backoff()
    while True:
        try:
            return call()
        except TransientError as exc:
            remaining = deadline - clock()
            if remaining <= 0:
                raise
            delay = min(backoff.next(), remaining)
            print(f"agent: {what} failed ({exc}); retrying in {delay:.1f} s", file=sys.stderr)
            sleep(delay)
