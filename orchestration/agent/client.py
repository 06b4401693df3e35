"""The portal's ingest API over HTTP (stdlib only).

Each thread of the agent (the reporter, the main thread) keeps one connection to the portal
open between calls (HTTP keep-alive): a run makes a handful of calls a second, and a new
connection for each cost the agent and the portal CPU on the cores the solver needs. A kept
connection that the server has closed meanwhile is noticed before it is used and replaced.
With a proxy configured in the environment (``http_proxy``, ``https_proxy``) calls go through
urllib, which knows how to use it.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import select
import sys
import threading
import time
import urllib.parse
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


_PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
_NETWORK_ERRORS = (OSError, http.client.HTTPException, TimeoutError)


class PortalClient:
    def __init__(
        self, *, portal_url: str, run_id: str, token: str, attempt: int, timeout: float = 15.0
    ) -> None:
        quoted = urllib.parse.quote(run_id, safe="")
        self.base = f"{portal_url.rstrip('/')}/api/v1/ingest/runs/{quoted}/"
        self.attempt = attempt
        self.timeout = timeout
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        parts = urllib.parse.urlsplit(self.base)
        self._https = parts.scheme == "https"
        self._host, self._port, self._path = parts.hostname or "", parts.port, parts.path
        self._proxied = any(os.environ.get(name) for name in _PROXY_VARS)
        self._local = threading.local()

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        payload = _dumps({"attempt": self.attempt, **body})
        headers = {**self._headers, "Content-Type": "application/json"}
        status, raw = self._call("POST", path, payload, headers)
        return _decode(raw)

    def put_file(self, path: str, file: Path, *, content_type: str) -> dict[str, Any]:
        with open(file, "rb") as fh:
            headers = {
                **self._headers,
                "Content-Type": content_type,
                "Content-Length": str(Path(file).stat().st_size),
            }
            status, raw = self._call("PUT", f"{path}?attempt={self.attempt}", fh, headers)
        return _decode(raw)

    def get_file(self, path: str, dest: Path, *, max_bytes: int) -> int:
        """GET `path` into `dest` (at most `max_bytes`); the number of bytes written."""
        url = f"{self.base}{path}?attempt={self.attempt}"

        def save(response: Any) -> int:
            size = 0
            with open(dest, "wb") as fh:
                while chunk := response.read(1 << 20):
                    size += len(chunk)
                    if size > max_bytes:
                        raise PortalError(f"{url}: more than {max_bytes} bytes")
                    fh.write(chunk)
            return size

        _, size = self._call("GET", f"{path}?attempt={self.attempt}", None, self._headers, save)
        return size

    # -- transport ------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        body: Any,
        headers: dict[str, str],
        reader: Callable[[Any], Any] | None = None,
    ) -> tuple[int, Any]:
        """One request; the answer's body (or what `reader` made of the response) on 2xx.
        Raises StaleAttempt on 409, TransientError on network errors, 5xx, 408 and 429,
        PortalError on any other refusal."""
        url = self.base + path
        if self._proxied:
            return self._call_urllib(method, url, body, headers, reader)
        conn = self._connection()
        try:
            conn.request(method, self._path + path, body=body, headers=headers)
            response = conn.getresponse()
            if 200 <= response.status < 300 and reader is not None:
                result = reader(response)
                response.read()
            else:
                result = response.read()
            if response.will_close:
                self._drop()
        except PortalError:
            self._drop()
            raise
        except _NETWORK_ERRORS as exc:
            self._drop()
            raise TransientError(f"{url}: {exc}") from None
        if not 200 <= response.status < 300:
            self._raise_for(response.status, result, url)
        return response.status, result

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None and conn.sock is not None and _closed_by_peer(conn.sock):
            conn.close()  # the server ended the kept connection while we were idle
        if conn is None:
            if self._https:
                import ssl

                conn = http.client.HTTPSConnection(
                    self._host,
                    self._port,
                    timeout=self.timeout,
                    context=ssl.create_default_context(),
                )
            else:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
            self._local.conn = conn
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def close(self) -> None:
        """Close this thread's connection (the others close when the process ends)."""
        self._drop()

    def _call_urllib(
        self,
        method: str,
        url: str,
        body: Any,
        headers: dict[str, str],
        reader: Callable[[Any], Any] | None,
    ) -> tuple[int, Any]:
        import urllib.error
        import urllib.request

        request = urllib.request.Request(url, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.status, reader(response) if reader else response.read()
        except urllib.error.HTTPError as exc:
            self._raise_for(exc.code, exc.read() or b"", url)
            raise  # unreachable: _raise_for always raises
        except (urllib.error.URLError, *_NETWORK_ERRORS) as exc:
            raise TransientError(f"{url}: {exc}") from None

    @staticmethod
    def _raise_for(status: int, raw: bytes, url: str) -> None:
        body = _decode(raw or b"")
        if status == 409:
            raise StaleAttempt(str(body.get("code", "stale_attempt")))
        if status >= 500 or status in (408, 429):
            raise TransientError(f"HTTP {status} from {url}")
        raise PortalError(f"HTTP {status} from {url}: {body}")


def _closed_by_peer(sock: Any) -> bool:
    """True when an idle kept-alive socket has been closed (or broken) by the other end: it
    reads as ready (EOF or an error) while we expect nothing."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


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
