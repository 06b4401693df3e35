"""The agents' API authenticates before it reads (ingest/api/gate.py), on the real stack:
uvicorn and PostgreSQL, driven as an attacker would, with raw sockets.

A stranger's request is answered 401 from its headers, whatever its body, without the server
waiting for the body or holding it; an agent's body is capped by its declared length (411,
413 naming the limit) and then parsed (a malformed one is a 400 saying what is wrong)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from urllib.parse import urlsplit

import httpx
import psutil
import pytest
from django.conf import settings

from ingest.tests.reports import stored_counts
from studies.models import Run
from studies.transitions import run_token

pytestmark = pytest.mark.slow

MB = 1024 * 1024
DECLARED = 18 * MB  # as the attack: under the 20 MB a telemetry batch may be
PATIENCE = 60  # seconds a test waits for an answer before it calls the server stuck


def _send_head(live, method: str, path: str, headers: dict[str, str]) -> socket.socket:
    url = urlsplit(live.stack.url)
    sock = socket.create_connection((url.hostname, url.port), timeout=PATIENCE)
    lines = [f"{method} {path} HTTP/1.1", f"Host: {url.netloc}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    return sock


def _answer(sock: socket.socket) -> tuple[int, dict[str, str], dict]:
    """The server's answer (a socket timeout here means it waited for more of the body)."""
    response = http.client.HTTPResponse(sock)
    response.begin()
    body = response.read()
    headers = {k.lower(): v for k, v in response.getheaders()}
    return response.status, headers, json.loads(body) if body else {}


def _partial(live, method: str, path: str, headers: dict[str, str], start: bytes):
    """Declare DECLARED bytes of body, send only `start` of it, and read the answer."""
    sock = _send_head(live, method, path, {"Content-Length": str(DECLARED), **headers})
    try:
        sock.sendall(start)
        return _answer(sock)
    finally:
        sock.close()


def _ingest(run: Run, endpoint: str, attempt: int | None = 2) -> str:
    query = f"?attempt={attempt}" if attempt is not None else ""
    return f"/api/v1/ingest/runs/{run.pk}/{endpoint}/{query}"


STRANGERS = [
    {},
    {"Authorization": "Bearer not-a-token"},
    {"Authorization": "Token a-user-token"},
]


@pytest.mark.parametrize("who", STRANGERS, ids=["no token", "wrong token", "user token"])
def test_a_stranger_is_told_401_without_the_server_waiting_for_its_body(live, live_run, who):
    """Each endpoint, with and without an attempt in the URL, and a body that is not even
    JSON: the 401 comes while 18 MB are still due, and the connection is closed."""
    run = live_run
    json_body = {"Content-Type": "application/json", **who}
    requests = [
        ("POST", _ingest(run, "telemetry"), json_body),
        ("POST", _ingest(run, "telemetry", None), json_body),
        ("POST", _ingest(run, "state", None), json_body),
        ("POST", _ingest(run, "heartbeat"), json_body),
        ("PUT", _ingest(run, "archive"), {"Content-Type": "application/gzip", **who}),
        ("POST", f"/api/v1/ingest/workers/{run.pk}/register/", json_body),
    ]
    for method, path, headers in requests:
        status, answer_headers, body = _partial(live, method, path, headers, b"{not json")
        assert status == 401, (path, body)
        assert body["code"] == "not_authenticated" and "token" in body["message"]
        assert answer_headers.get("connection") == "close"
    assert stored_counts(run) == (0, 0)
    assert Run.objects.get(pk=run.pk).heartbeat_at is None


def _rss(process: psutil.Process) -> int:
    total = 0
    for p in (process, *process.children(recursive=True)):
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def test_strangers_bodies_are_not_taken_into_the_web_processs_memory(live, live_run):
    """8 strangers post 18 MB each at once, with a bearer token and a JSON content type (what
    the quick path used to read whole): the web process's resident memory, sampled all the
    while, grows by less than half of what they sent. Reading and parsing the bodies first
    took it from 391 MB to 1,219 MB."""
    run = live_run
    assert live.stack.web is not None
    web = psutil.Process(live.stack.web.pid)
    before = _rss(web)
    peak = before
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _rss(web))
            time.sleep(0.005)

    answers: list[int | None] = []
    chunk = b'{"attempt": 2, "log": ["' + b"x" * (MB - 30) + b'"]}'
    declared = 18 * len(chunk)

    def stranger() -> None:
        headers = {
            "Content-Type": "application/json",
            "Authorization": "Bearer not-a-token",
            "Content-Length": str(declared),
        }
        sock = _send_head(live, "POST", _ingest(run, "telemetry", None), headers)
        status = None
        try:
            for _ in range(18):
                sock.sendall(chunk)
        except OSError:
            pass  # the server answered and closed: the rest is not taken
        try:
            status = _answer(sock)[0]
        except (OSError, http.client.HTTPException):
            pass  # the answer was lost with the connection's reset
        finally:
            sock.close()
        answers.append(status)

    sampler = threading.Thread(target=sample)
    sampler.start()
    threads = [threading.Thread(target=stranger) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    sampler.join()
    posted = 8 * declared
    assert peak - before < posted / 2, f"grew by {(peak - before) / MB:.0f} MB"
    assert all(a in (401, None) for a in answers), answers
    assert stored_counts(run) == (0, 0)


def test_an_agents_body_of_no_declared_length_or_over_the_limit_is_refused_naming_it(
    live, live_run
):
    run = live_run
    token = run_token(run_id=run.pk, attempt=2)
    agent = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    limit_mb = settings.DATA_UPLOAD_MAX_MEMORY_SIZE // MB
    # over the limit: answered from the headers (nothing of the body was sent)
    sock = _send_head(
        live,
        "POST",
        _ingest(run, "telemetry"),
        {**agent, "Content-Length": str(settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)},
    )
    with sock:
        status, _, body = _answer(sock)
    assert status == 413 and body["code"] == "body_too_large"
    assert f"at most {limit_mb:g} MB" in body["message"]
    # a heartbeat is a small message: its limit is a megabyte
    sock = _send_head(
        live, "POST", _ingest(run, "heartbeat"), {**agent, "Content-Length": "2000000"}
    )
    with sock:
        status, _, body = _answer(sock)
    assert status == 413 and "at most 1 MB" in body["message"]
    # an archive: its limit is the portal's archive limit
    archive_limit = settings.WINDTUNNEL["ARCHIVE_MAX_MB"] * MB
    sock = _send_head(
        live,
        "PUT",
        _ingest(run, "archive"),
        {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/gzip",
            "Content-Length": str(archive_limit + 1),
        },
    )
    with sock:
        status, _, body = _answer(sock)
    assert status == 413 and f"{settings.WINDTUNNEL['ARCHIVE_MAX_MB']:g} MB" in body["message"]
    # no declared length: a chunked body is refused before a chunk is read
    sock = _send_head(
        live, "POST", _ingest(run, "telemetry"), {**agent, "Transfer-Encoding": "chunked"}
    )
    with sock:
        status, _, body = _answer(sock)
    assert status == 411 and body["code"] == "length_required"
    assert "Content-Length" in body["message"] and f"{limit_mb:g} MB" in body["message"]
    assert stored_counts(run) == (0, 0)


def test_an_agents_malformed_body_is_a_400_saying_what_is_wrong(live, live_run):
    run = live_run
    token = run_token(run_id=run.pk, attempt=2)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    url = f"{live.stack.url}{_ingest(run, 'telemetry')}"
    r = httpx.post(url, content=b"{not json", headers=headers, timeout=PATIENCE)
    assert r.status_code == 400 and "JSON parse error" in r.json()["message"]
    # a body is read as far as its declared length and parsed as it stands: a batch whose
    # declared length cuts it short is not JSON, and the server waits for nothing more
    whole = json.dumps({"attempt": 2, "log": ["Time = 1"]}).encode()
    declared = len(whole) - 5
    sock = _send_head(
        live, "POST", _ingest(run, "telemetry"), {**headers, "Content-Length": str(declared)}
    )
    with sock:
        sock.sendall(whole[:declared])
        status, _, body = _answer(sock)
    assert status == 400 and "JSON parse error" in body["message"]
    # a report naming another attempt than its token's opens nothing
    r = httpx.post(url, json={"attempt": 1, "log": ["x"]}, headers=headers, timeout=PATIENCE)
    assert r.status_code == 401
    assert stored_counts(run) == (0, 0)


def test_an_agent_naming_its_attempt_only_in_the_body_is_served_as_before(live, live_run):
    """Agents before the attempt went into the URL: authenticated by the run's row, their
    batches stored by the quick path, an earlier attempt's agent told to stop."""
    run = live_run
    url = f"{live.stack.url}{_ingest(run, 'telemetry', None)}"

    def post(attempt: int):
        token = run_token(run_id=run.pk, attempt=attempt)
        body = {"attempt": attempt, "series": {"residual.p": [[1.0, 0.5]]}, "log": ["Time = 1"]}
        return httpx.post(
            url, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=PATIENCE
        )

    stored = post(2)
    assert stored.status_code == 200 and "x-frame-options" not in stored.headers  # quick path
    stale = post(1)
    assert stale.status_code == 409 and stale.json()["code"] == "stale_attempt"
    assert stored_counts(run) == (1, 1)
