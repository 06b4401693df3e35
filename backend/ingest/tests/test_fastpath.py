"""The telemetry quick path (ingest/api/fastpath.py) on the real stack: uvicorn, PostgreSQL,
the Redis channel layer and a websocket subscriber. It stores and publishes the common
batch, and every other case gets the view's answer: the fence still holds."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets
from django.conf import settings

from studies.models import Run
from studies.transitions import run_token

pytestmark = pytest.mark.slow


def post(live, run: Run, body, *, attempt_token: int = 2, raw: bytes | None = None):
    """As the agent posts a batch: its attempt named in the URL too."""
    token = run_token(run_id=run.pk, attempt=attempt_token)
    return httpx.post(
        f"{live.stack.url}/api/v1/ingest/runs/{run.pk}/telemetry/?attempt={attempt_token}",
        content=raw if raw is not None else json.dumps(body),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=30,
    )


def batch(x: float, *, attempt: int = 2) -> dict:
    return {
        "attempt": attempt,
        "series": {"residual.p": [[x, 0.5]]},
        "log": [f"Time = {x:g}"],
        "phase": "solving",
    }


def test_a_batch_is_stored_and_published_and_a_stale_attempts_is_neither(live, live_run):
    run = live_run
    base = live.stack.url.replace("http://", "ws://")
    url = f"{base}/ws/runs/{run.pk}/?token={live.headers['Authorization'].split()[1]}"

    async def scenario() -> tuple[list[dict], list[httpx.Response]]:
        answers = []
        async with websockets.connect(url, open_timeout=20) as ws:
            subscribed = json.loads(await ws.recv())
            assert subscribed["type"] == "subscribed"
            answers.append(await asyncio.to_thread(post, live, run, batch(1)))
            # the earlier attempt's agent, still alive: told to stop, its points kept out
            stale = batch(99, attempt=1)
            answers.append(await asyncio.to_thread(post, live, run, stale, attempt_token=1))
            answers.append(await asyncio.to_thread(post, live, run, batch(2)))
            got: list[dict] = []
            async with asyncio.timeout(20):
                while len(got) < 2:
                    message = json.loads(await ws.recv())
                    if message["type"] == "telemetry":
                        got.append(message)
        return got, answers

    got, answers = asyncio.run(scenario())
    assert [a.status_code for a in answers] == [200, 409, 200]
    # the stored batches were answered by the quick path, the refusal by Django (its
    # middleware marks every response it makes)
    assert [("x-frame-options" in a.headers) for a in answers] == [False, True, False]
    assert answers[0].json() == {
        "stop": False,
        "interval": settings.WINDTUNNEL["TELEMETRY_INTERVAL"],
    }
    assert [m["series"] for m in got] == [
        {"residual.p": [[1.0, 0.5]]},
        {"residual.p": [[2.0, 0.5]]},
    ]
    assert got[1]["seq"] == got[0]["seq"] + 1  # nothing was published (or stored) between
    assert got[0]["log"] == ["Time = 1"] and got[0]["attempt"] == 2
    stored = live.get(f"/api/v1/runs/{run.pk}/telemetry/", params={"series": "residual.p"}).json()
    assert stored["series"]["residual.p"]["x"] == [1.0, 2.0]
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.phase == "solving" and fresh.heartbeat_at is not None


def test_what_the_quick_path_does_not_take_gets_the_views_answer(live, live_run):
    run = live_run
    stranger = httpx.post(
        f"{live.stack.url}/api/v1/ingest/runs/{run.pk}/telemetry/",
        json=batch(1),
        headers={"Authorization": "Bearer not-a-token"},
    )
    assert stranger.status_code == 401
    out_of_range = post(live, run, {**batch(1), "attempt": 0})
    assert out_of_range.status_code == 400 and out_of_range.json()["field"] == "attempt"
    bad_series = post(live, run, {**batch(1), "series": {"residual.p": [[1, "high"]]}})
    assert bad_series.status_code == 400 and bad_series.json()["field"] == "series"
    assert post(live, run, None, raw=b"{not json").status_code == 400
    # a float attempt is an integer to the schema: the view takes it and stores the batch
    assert post(live, run, {**batch(3), "attempt": 2.0}).status_code == 200
    stored = live.get(f"/api/v1/runs/{run.pk}/telemetry/", params={"series": "residual.p"}).json()
    assert stored["series"]["residual.p"]["x"] == [3.0]


def test_a_running_report_is_taken_by_the_quick_path_and_every_other_state_by_the_view(
    live, live_run
):
    run = live_run
    Run.objects.filter(pk=run.pk).update(state="provisioning", started_at=None)

    def state(body, *, attempt_token: int = 2):
        token = run_token(run_id=run.pk, attempt=attempt_token)
        return httpx.post(
            f"{live.stack.url}/api/v1/ingest/runs/{run.pk}/state/?attempt={attempt_token}",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )

    running = {"state": "running", "attempt": 2, "exit_code": None, "reason": "", "message": ""}
    # the earlier attempt's agent: refused by the fence, answered by the view (409)
    stale = state({**running, "attempt": 1}, attempt_token=1)
    assert stale.status_code == 409 and "x-frame-options" in stale.headers
    assert Run.objects.get(pk=run.pk).state == "provisioning"
    first = state(running)
    assert first.status_code == 200 and "x-frame-options" not in first.headers  # quick path
    assert first.json() == {
        "stop": False,
        "interval": settings.WINDTUNNEL["TELEMETRY_IDLE_INTERVAL"],
    }
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.state == "running" and fresh.started_at is not None
    # a repeat (the answer was lost): nothing changes, and the view answers as before
    again = state(running)
    assert again.status_code == 200 and "x-frame-options" in again.headers
    assert Run.objects.get(pk=run.pk).started_at == fresh.started_at
    # a body that does not check: the view names the field
    bad = state({**running, "state": "flying"})
    assert bad.status_code == 400 and bad.json()["field"] == "state"
    # the final report is the view's
    done = state({**running, "state": "completed", "exit_code": 0, "series": {}, "log": []})
    assert done.status_code == 200 and "x-frame-options" in done.headers
    assert Run.objects.get(pk=run.pk).state == "completed"
