"""Real receivers on loopback for the notification tests: an HTTP server in a thread that
checks each request's signature, and an SMTP server (aiosmtpd)."""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller

from notifications.signing import signature_verify


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    signed: bool  # the signature checked out under the receiver's secret

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class HttpReceiver:
    """Answers each POST with the next status of `statuses` (the last one repeats), and
    `reply` as the body when given (and as a redirect's Location)."""

    statuses: list[int] = field(default_factory=lambda: [200])
    secret: str = ""
    reply: bytes = b""
    requests: list[Received] = field(default_factory=list)

    def start(self) -> HttpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                signed = bool(receiver.secret) and signature_verify(
                    secret=receiver.secret,
                    header=headers.get("windtunnel-signature", ""),
                    body=body,
                )
                index = min(len(receiver.requests), len(receiver.statuses) - 1)
                receiver.requests.append(Received(headers=headers, body=body, signed=signed))
                status = receiver.statuses[index]
                reply = receiver.reply or (
                    b"ok" if status < 300 else f"receiver says {status}".encode()
                )
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", f"http://127.0.0.1:1/{reply.decode()}")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/windtunnel"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Message]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        self.messages.append(
            (list(envelope.rcpt_tos), message_from_bytes(envelope.content, policy=policy.default))
        )
        return "250 Message accepted for delivery"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class SmtpReceiver:
    """A real SMTP server on loopback; `messages` holds (recipients, parsed message)."""

    def __init__(self) -> None:
        self.inbox = _Inbox()
        self.port = free_port()
        self.controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port)

    @property
    def messages(self) -> list[tuple[list[str], Message]]:
        return self.inbox.messages

    def start(self) -> SmtpReceiver:
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()
