"""HTTP/1.1 over one kept-alive socket: just what the agent's calls to the portal need.

The standard library's http.client imports the email package to parse headers (about a
third of the agent's start-up, paid again by every Slurm job). The agent makes a handful of
plain requests to one server: a request line, a few headers, a body; an answer with a
status, headers and a body by Content-Length, chunked, or up to the connection's close. TLS
(`https://` portals) through the ssl module, imported only then.
"""

from __future__ import annotations

import io
import socket

TYPE_CHECKING = False  # typing is not imported at run time (every Slurm job starts an agent)
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = ["Connection", "ProtocolError", "Response"]

_MAX_LINE = 65536
_MAX_HEADERS = 100


class ProtocolError(OSError):
    """The answer is not HTTP/1.x as we know it (or the connection broke inside it)."""


class Response:
    """An answer's status and headers; its body through `read()` (all of it, or `size` bytes
    at most per call: b"" at its end). Read the body to its end before the next request."""

    def __init__(self, conn: Connection, status: int, headers: dict[str, str], method: str):
        self.status = status
        self.headers = headers
        assert conn._rfile is not None  # an answer comes on an open connection
        self._rfile = conn._rfile
        self.will_close = (
            headers.get("connection", "").lower() == "close" or conn._version == "HTTP/1.0"
        )
        encoding = headers.get("transfer-encoding", "").lower()
        self._chunked = "chunked" in encoding
        self._left: int | None = None  # bytes left of the body (or of the chunk)
        self._done = False
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            self._done = True
        elif self._chunked:
            self._left = 0
        elif "content-length" in headers:
            try:
                self._left = int(headers["content-length"])
            except ValueError:
                raise ProtocolError(f"bad Content-Length {headers['content-length']!r}") from None
            if self._left < 0:
                raise ProtocolError("negative Content-Length")
            self._done = self._left == 0
        else:  # the body ends with the connection
            self.will_close = True

    def read(self, size: int = -1) -> bytes:
        if self._done:
            return b""
        if size < 0:
            parts = []
            while chunk := self.read(1 << 20):
                parts.append(chunk)
            return b"".join(parts)
        if self._chunked:
            return self._read_chunked(size)
        if self._left is None:  # to the close
            data = self._rfile.read1(size) if size else b""
            if not data:
                self._done = True
            return data
        data = self._rfile.read(min(size, self._left))
        if not data:
            raise ProtocolError("connection closed inside the body")
        self._left -= len(data)
        self._done = self._left == 0
        return data

    def _read_chunked(self, size: int) -> bytes:
        if self._left == 0:
            line = self._rfile.readline(_MAX_LINE)
            if not line.endswith(b"\n"):
                raise ProtocolError("connection closed inside a chunked body")
            try:
                self._left = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size {line[:40]!r}") from None
            if self._left == 0:  # the last chunk: trailers up to an empty line
                while self._rfile.readline(_MAX_LINE) not in (b"\r\n", b"\n", b""):
                    pass
                self._done = True
                return b""
        assert self._left is not None
        data = self._rfile.read(min(size, self._left))
        if not data:
            raise ProtocolError("connection closed inside a chunk")
        self._left -= len(data)
        if self._left == 0:
            self._rfile.readline(_MAX_LINE)  # the CRLF after the chunk
        return data


class Connection:
    """One connection to `host:port`, opened on the first request and kept open between
    requests. Socket errors (OSError, TimeoutError) and ProtocolError propagate; after one,
    `close()` and use a new Connection."""

    def __init__(self, host: str, port: int | None, *, https: bool, timeout: float) -> None:
        self.host = host
        self.port = port or (443 if https else 80)
        self.https = https
        self.timeout = timeout
        default = 443 if https else 80
        name = f"[{host}]" if ":" in host else host
        self._host_header = name if self.port == default else f"{name}:{self.port}"
        self.sock: socket.socket | None = None
        self._rfile: io.BufferedReader | None = None
        self._version = "HTTP/1.1"

    def _open(self) -> None:
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.https:
                import ssl  # only for https portals

                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self._rfile = sock.makefile("rb")

    def request(
        self,
        method: str,
        target: str,
        headers: dict[str, str],
        body: bytes | bytearray | memoryview | BinaryIO | None = None,
    ) -> Response:
        """Send a request (`body`: bytes, a binary file with its Content-Length in `headers`,
        or None) and read the answer's status and headers."""
        if self.sock is None:
            self._open()
        assert self.sock is not None
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host_header}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if isinstance(body, bytes | bytearray | memoryview):
            lines.append(f"Content-Length: {len(body)}")
        elif body is None and method in ("POST", "PUT"):
            lines.append("Content-Length: 0")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if body is None:
            self.sock.sendall(head)
        elif isinstance(body, bytes | bytearray | memoryview):
            self.sock.sendall(head + bytes(body))  # one write: the request goes out whole
        else:
            self.sock.sendall(head)
            while chunk := body.read(1 << 20):
                self.sock.sendall(chunk)
        return self._response(method)

    def _response(self, method: str) -> Response:
        rfile = self._rfile
        assert rfile is not None
        while True:
            line = rfile.readline(_MAX_LINE + 1)
            if not line:
                raise ProtocolError("the portal closed the connection without an answer")
            version, _, rest = line.decode("latin-1").rstrip("\r\n").partition(" ")
            if not version.startswith("HTTP/1."):
                raise ProtocolError(f"not an HTTP/1.x answer: {line[:60]!r}")
            try:
                status = int(rest[:3])
            except ValueError:
                raise ProtocolError(f"bad status line {line[:60]!r}") from None
            headers: dict[str, str] = {}
            for _ in range(_MAX_HEADERS + 1):
                raw = rfile.readline(_MAX_LINE + 1)
                if raw in (b"\r\n", b"\n"):
                    break
                if not raw:
                    raise ProtocolError("connection closed inside the headers")
                name, sep, value = raw.decode("latin-1").partition(":")
                if not sep:
                    raise ProtocolError(f"bad header line {raw[:60]!r}")
                headers[name.strip().lower()] = value.strip()
            else:
                raise ProtocolError("too many headers")
            if status != 100:  # an interim answer: the real one follows
                self._version = version
                return Response(self, status, headers, method)

    def close(self) -> None:
        if self._rfile is not None:
            self._rfile.close()
            self._rfile = None
        if self.sock is not None:
            self.sock.close()
            self.sock = None
