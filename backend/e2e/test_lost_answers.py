"""A real agent, on a real OpenFOAM case, reporting to the real portal through a loopback
proxy that loses the portal's answer to the agent's first telemetry batch: the portal stored
the batch, the agent saw its connection close without an answer, sent the batch again (same
points, same number) and the portal stored it once."""

from __future__ import annotations

import array
import base64
import dataclasses
import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.utils import timezone

from catalog.models import Backend
from core.testing import wait_for
from dispatch.start import run_spec
from orchestration.drivers.local import LocalDriver
from studies.models import Run
from studies.services import study_create
from studies.transitions import hash_run_token, run_token
from telemetry.models import LogChunk, SeriesChunk
from telemetry.watch import redis_client, watch_key

pytestmark = [pytest.mark.solver, pytest.mark.slow]

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "host", "content-length"}


@dataclasses.dataclass
class Exchange:
    method: str
    path: str
    body: Any  # parsed JSON, or bytes
    status: int
    answer: bytes
    lost: bool  # the agent never got the answer


class AnswerLosingProxy:
    """Forwards every request to the portal and its answer back, except the answer to the
    first telemetry batch: that connection is closed without a word."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.exchanges: list[Exchange] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                proxy.forward(self)

            do_PUT = do_GET = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def forward(self, request: BaseHTTPRequestHandler) -> None:
        raw = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        upstream = http.client.HTTPConnection(
            self.upstream.hostname or "127.0.0.1", self.upstream.port, timeout=60
        )
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        upstream.request(request.command, request.path, body=raw, headers=headers)
        response = upstream.getresponse()
        answer = response.read()
        upstream.close()
        is_json = request.headers.get("Content-Type") == "application/json"
        with self.lock:
            lose = "/telemetry/" in request.path and not any(e.lost for e in self.exchanges)
            self.exchanges.append(
                Exchange(
                    method=request.command,
                    path=request.path,
                    body=json.loads(raw) if is_json and raw else raw,
                    status=response.status,
                    answer=answer,
                    lost=lose,
                )
            )
        if lose:  # the portal took it; the agent hears nothing
            request.close_connection = True
            return
        request.send_response(response.status)
        request.send_header("Content-Type", response.getheader("Content-Type") or "")
        request.send_header("Content-Length", str(len(answer)))
        request.end_headers()
        request.wfile.write(answer)

    def batches(self) -> list[dict[str, Any]]:
        """Every batch the agent sent (telemetry, and the final report's), in order."""
        with self.lock:
            return [
                e.body
                for e in self.exchanges
                if e.method == "POST"
                and ("/telemetry/" in e.path or "/state/" in e.path)
                and isinstance(e.body, dict)
                and "batch_seq" in e.body
            ]


def _column(value: Any) -> list[float]:
    if isinstance(value, list):
        return [float(v) for v in value]
    values = array.array("d")
    values.frombytes(base64.b64decode(value))
    return values.tolist()


@pytest.fixture
def proxy(live):
    p = AnswerLosingProxy(live.stack.url)
    p.thread.start()
    yield p
    p.server.shutdown()
    p.server.server_close()


def test_a_batch_whose_answer_was_lost_is_sent_again_and_stored_once(
    live, proxy, tmp_path, settings, monkeypatch
):
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)  # the agent goes to the loopback proxy
    Backend.objects.update_or_create(
        name="noop", defaults={"kind": "noop", "cores": 64, "memory_gb": 256, "max_nodes": 1}
    )
    spec = {
        "name": "lost answers",
        "template": "cavity",
        "backend": "noop",  # the portal starts nothing: this test starts the agent
        "parameters": {"end_time": 1.0, "cells": 10},
    }
    study = study_create(tenant=live.tenant, owner=live.tenant.user, spec=spec, submit=True)
    token = run_token(run_id=Run.objects.get(study=study).pk, attempt=1)
    Run.objects.filter(study=study).update(
        state="provisioning",
        attempt=1,
        token_hash=hash_run_token(token),
        provisioning_at=timezone.now(),
    )
    run = Run.objects.select_related("backend").get(study=study)
    redis_client().set(watch_key(run.pk), 1, ex=120)  # watched: a batch every interval
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "PUBLIC_URL": proxy.url}
    agent_spec = dataclasses.replace(
        run_spec(run=run, study=study, token=token), work_dir=str(tmp_path / "run"), sandbox=None
    )
    driver = LocalDriver(fork_server=False)
    driver.prepare(agent_spec)
    driver.start(agent_spec)

    def ended():
        return Run.objects.filter(pk=run.pk, results_at__isnull=False).first()

    done = wait_for(ended, timeout=300, what="the run's final report")
    assert done.state == "completed", (done.state, done.message)

    (lost,) = [e for e in proxy.exchanges if e.lost]
    assert lost.status == 200 and "duplicate" not in json.loads(lost.answer)  # stored

    def same_batch(body: Any) -> bool:
        keys = ("batch_seq", "series", "log")
        return isinstance(body, dict) and all(body.get(k) == lost.body.get(k) for k in keys)

    again = [e for e in proxy.exchanges if same_batch(e.body) and not e.lost]
    assert again, "the agent did not send the batch again"
    assert all(json.loads(e.answer).get("duplicate") is True for e in again)

    # what is stored is each numbered batch once, in order
    firsts: dict[int, dict[str, Any]] = {}
    for batch in proxy.batches():
        firsts.setdefault(batch["batch_seq"], batch)
    sent = [firsts[n] for n in sorted(firsts)]
    assert list(firsts) == sorted(firsts)
    stored_lines = [
        line for c in LogChunk.objects.filter(run=run).order_by("seq") for line in c.lines
    ]
    assert stored_lines == [line for b in sent for line in b.get("log", [])]
    chunks = SeriesChunk.objects.filter(run=run, name="residual.Ux").order_by("seq")
    stored_x = [x for c in chunks for x in c.xs]
    sent_x = [
        x
        for b in sent
        if "residual.Ux" in b.get("series", {})
        for x in _column(b["series"]["residual.Ux"]["x"])
    ]
    assert stored_x == sent_x and len(stored_x) == len(set(stored_x)) > 0
