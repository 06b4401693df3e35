"""A telemetry batch sent twice at once is stored once, on the real stack (uvicorn's quick
path and Django's view, PostgreSQL's row locks): the batch's number is taken in the
statement that stores its points."""

from __future__ import annotations

import threading

import httpx
import pytest

from studies.transitions import run_token
from telemetry.models import LogChunk
from telemetry.selectors import series_values

pytestmark = pytest.mark.slow


def test_the_same_batch_posted_from_two_threads_at_once_is_stored_once(live, live_run):
    run = live_run
    url = f"{live.stack.url}/api/v1/ingest/runs/{run.pk}/telemetry/?attempt=2"
    headers = {"Authorization": f"Bearer {run_token(run_id=run.pk, attempt=2)}"}
    rounds = 10
    for seq in range(1, rounds + 1):
        body = {
            "attempt": 2,
            "batch_seq": seq,
            "series": {"residual.p": [[float(seq), 0.5]]},
            "log": [f"Time = {seq}"],
        }
        start = threading.Barrier(2)
        answers: list[httpx.Response] = []

        def post(body=body, start=start, answers=answers) -> None:
            with httpx.Client(headers=headers, timeout=60) as client:
                start.wait()
                answers.append(client.post(url, json=body))

        threads = [threading.Thread(target=post) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
        assert sorted(a.json().get("duplicate", False) for a in answers) == [False, True]
    xs, _ = series_values(run=run, attempt=2, name="residual.p")
    assert xs == [float(seq) for seq in range(1, rounds + 1)]
    lines = [line for c in LogChunk.objects.filter(run=run).order_by("seq") for line in c.lines]
    assert lines == [f"Time = {seq}" for seq in range(1, rounds + 1)]
