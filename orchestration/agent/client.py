"""The portal's ingest API over HTTP (stdlib only).

Each thread of the agent (the reporter, the main thread) keeps one connection to the portal
open between calls (HTTP keep-alive): a run makes a handful of calls a second, and a new
connection for each cost the agent and the portal CPU on the cores the solver needs. A kept
connection that the server has closed meanwhile is noticed before it is used and replaced.
Requests go through the agent's own small HTTP/1.1 transport (`wire`: http.client would
import the email package into every Slurm job); with a proxy configured in the environment
(``http_proxy``, ``https_proxy``) they go through urllib, which knows how to use it.
"""

from __future__ import annotations

import json
import math
import os
import select
import sys
import threading
import time

from orchestration.agent.wire import Connection
from orchestration.backoff import Backoff

TYPE_CHECKING = False  # typing is not imported at run time (every Slurm job starts an agent)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = [
    "PortalClient",
    "PortalError",
    "StaleAttempt",
    "TransientError",
    "json_safe",
    "with_retries",
]


def _dumps(body: dict[str, Any]) -> bytes:
    # telemetry columns travel packed (reporter.pack_columns): little here is a float
    return json.dumps(body, allow_nan=False, separators=(",", ":")).encode()


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
_NETWORK_ERRORS = (OSError, TimeoutError)  # ProtocolError is an OSError
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _quote(text: str) -> str:
    """Percent-encode everything but RFC 3986's unreserved characters (a path segment)."""
    return "".join(
        c if c in _UNRESERVED else "".join(f"%{b:02X}" for b in c.encode()) for c in text
    )


def split_url(url: str) -> tuple[bool, str, int | None, str]:
    """(https, host, port, path) of an http(s) URL; ValueError for anything else."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise ValueError(f"the portal URL must be http:// or https://, not {url!r}")
    netloc, slash, path = rest.partition("/")
    netloc = netloc.rpartition("@")[2]  # no credentials in the URL: the token is the auth
    if netloc.startswith("["):  # [IPv6]:port
        host, _, after = netloc[1:].partition("]")
        port_text = after[1:] if after.startswith(":") else ""
    else:
        host, _, port_text = netloc.partition(":")
    if not host:
        raise ValueError(f"no host in the portal URL {url!r}")
    port = int(port_text) if port_text else None
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"bad port in the portal URL {url!r}")
    return scheme.lower() == "https", host, port, slash + path


class PortalClient:
    def __init__(
        self, *, portal_url: str, run_id: str, token: str, attempt: int, timeout: float = 15.0
    ) -> None:
        self.base = f"{portal_url.rstrip('/')}/api/v1/ingest/runs/{_quote(run_id)}/"
        self.attempt = attempt
        self.timeout = timeout
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._https, self._host, self._port, self._path = split_url(self.base)
        self._proxied = any(os.environ.get(name) for name in _PROXY_VARS)
        self._local = threading.local()

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST a report; its attempt goes in the URL as well as in the body: the portal
        authenticates the token from the URL and headers before it reads the body."""
        payload = _dumps({"attempt": self.attempt, **body})
        headers = {**self._headers, "Content-Type": "application/json"}
        status, raw = self._call("POST", f"{path}?attempt={self.attempt}", payload, headers)
        return _decode(raw)

    def put_file(
        self, path: str, file: str | os.PathLike[str], *, content_type: str
    ) -> dict[str, Any]:
        with open(file, "rb") as fh:
            headers = {
                **self._headers,
                "Content-Type": content_type,
                "Content-Length": str(os.stat(file).st_size),
            }
            status, raw = self._call("PUT", f"{path}?attempt={self.attempt}", fh, headers)
        return _decode(raw)

    def get_file(self, path: str, dest: str | os.PathLike[str], *, max_bytes: int) -> int:
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

        size: int  # what `save` returned
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
            response = conn.request(method, self._path + path, headers, body)
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

    def _connection(self) -> Connection:
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is not None and conn.sock is not None and _closed_by_peer(conn.sock):
            conn.close()  # the server ended the kept connection while we were idle
        if conn is None:
            conn = Connection(self._host, self._port, https=self._https, timeout=self.timeout)
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


def with_retries(
    call: Callable[[], Any],
    *,
    deadline: float,
    what: str,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Any] = time.sleep,
) -> Any:
    """Run `call`, retrying TransientError with backoff until `deadline` (monotonic).

    StaleAttempt and PortalError propagate at once; the last TransientError propagates
    when the deadline passes.
    """
    backoff = Backoff(first=0.5, cap=10.0)  # 0.5 s doubling to 10 s
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
