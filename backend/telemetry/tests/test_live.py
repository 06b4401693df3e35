"""Live streams on the real stack: uvicorn + Channels + Redis layer + Celery + a real solver."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets

from core.schemas import validate
from core.testing import wait_for
from studies.models import Run
from studies.usage import usage_for_tenant
from telemetry.consumers import LIVE_MESSAGES
from tenancy.services import api_token_create

pytestmark = [pytest.mark.solver, pytest.mark.slow]


def ws_url(live, path: str, token: str | None = None) -> str:
    base = live.stack.url.replace("http://", "ws://")
    token = token if token is not None else live.headers["Authorization"].split()[1]
    return f"{base}{path}?token={token}"


async def collect(url: str, *, until, timeout: float = 120) -> list[dict]:
    """Every message of a stream until `until(message)` is true."""
    out: list[dict] = []
    async with websockets.connect(url, open_timeout=20) as ws:
        async with asyncio.timeout(timeout):
            while True:
                message = json.loads(await ws.recv())
                out.append(message)
                if until(message):
                    return out


def submit_one(live, spec) -> tuple[dict, str]:
    study = live.post("/api/v1/studies/", json=spec).json()
    assert "id" in study, study
    run_id = live.get(f"/api/v1/studies/{study['id']}/runs/").json()["results"][0]["id"]
    return study, run_id


def ended(message) -> bool:
    return message["type"] == "state" and message["run"]["state"] in (
        "completed",
        "failed",
        "cancelled",
    )


def test_a_client_receives_the_live_points_of_a_running_case_in_order(live):
    study, run_id = submit_one(
        live, {"name": "live", "template": "cavity", "parameters": {"cells": 16, "end_time": 1.0}}
    )
    messages = asyncio.run(collect(ws_url(live, f"/ws/runs/{run_id}/"), until=ended))
    for m in messages:
        validate(LIVE_MESSAGES, m, definition="LiveMessage", what="the message")
    assert messages[0]["type"] == "subscribed"
    events = messages[1:]
    seqs = [m["seq"] for m in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "no gaps, no duplicates"
    xs = [
        x for m in events if m["type"] == "telemetry" for x, _ in m["series"].get("residual.Ux", [])
    ]
    assert len(xs) >= 20 and xs == sorted(xs) and len(set(xs)) == len(xs)
    assert [m["run"]["state"] for m in events if m["type"] == "state"][-1] == "completed"
    assert any("Time = " in line for m in events if m["type"] == "telemetry" for line in m["log"])
    # the live stream carried exactly what the REST API stores
    rest = live.get(
        f"/api/v1/runs/{run_id}/telemetry/", params={"series": "residual.Ux", "max_points": 100000}
    ).json()
    assert rest["series"]["residual.Ux"]["x"] == xs


def test_a_dropped_message_gap_is_repaired_from_rest(live):
    # a few seconds of solving: several live batches, whenever the agent learns it is watched
    study, run_id = submit_one(
        live, {"name": "gap", "template": "cavity", "parameters": {"cells": 30, "end_time": 10.0}}
    )
    messages = asyncio.run(collect(ws_url(live, f"/ws/runs/{run_id}/"), until=ended))
    telemetry = [m for m in messages if m["type"] == "telemetry" and "residual.p" in m["series"]]
    assert len(telemetry) >= 3
    dropped = telemetry[1]  # pretend the channel layer lost this one
    seen = [m for m in messages if m is not dropped and m["type"] != "subscribed"]
    seqs = [m["seq"] for m in seen]
    gap_after = next(a for a, b in zip(seqs, seqs[1:], strict=False) if b != a + 1)
    assert gap_after == dropped["seq"] - 1
    repair = live.get(f"/api/v1/runs/{run_id}/telemetry/", params={"since_seq": gap_after}).json()
    assert repair["last_seq"] >= dropped["seq"]
    repaired_x = [x for x in repair["series"]["residual.p"]["x"]]
    live_after = [
        x
        for m in seen
        if m["type"] == "telemetry" and m["seq"] > gap_after
        for x, _ in m["series"].get("residual.p", [])
    ]
    assert sorted(repaired_x) == sorted(
        live_after + [x for x, _ in dropped["series"]["residual.p"]]
    )
    assert all(line in repair["log"] for line in dropped["log"])


def test_another_tenant_cannot_subscribe_and_strangers_are_refused(live, make_tenant):
    study, run_id = submit_one(
        live,
        {"name": "private", "template": "cavity", "parameters": {"cells": 8, "end_time": 0.05}},
    )
    other = make_tenant()
    other_token = api_token_create(user=other.user)

    async def close_code(url, **kw):
        async with websockets.connect(url, open_timeout=20, **kw) as ws:
            try:
                async with asyncio.timeout(20):
                    while True:
                        await ws.recv()
            except websockets.ConnectionClosed as exc:
                return exc.rcvd.code if exc.rcvd else None

    assert asyncio.run(close_code(ws_url(live, f"/ws/runs/{run_id}/", other_token))) == 4404
    assert asyncio.run(close_code(ws_url(live, f"/ws/studies/{study['id']}/", other_token))) == 4404
    assert asyncio.run(close_code(ws_url(live, f"/ws/runs/{run_id}/", "wt_not-a-token"))) == 4401
    assert (
        asyncio.run(close_code(ws_url(live, "/ws/runs/00000000-0000-0000-0000-000000000000/")))
        == 4404
    )
    with pytest.raises(websockets.InvalidStatus):
        asyncio.run(close_code(ws_url(live, f"/ws/runs/{run_id}/"), origin="http://evil.example"))


def test_an_unstable_case_is_stopped_as_diverged_and_frees_its_cores(live):
    # a time step far above the Courant limit (Co ≈ 80): unstable for a transient run
    spec = {
        "name": "unstable",
        "template": "cavity",
        "parameters": {"cells": 20, "end_time": 50, "lid_velocity": 10},
        "derived": {"delta_t": "0.05"},
        "convergence": {"diverge": {"nan": True, "courant_above": 5}},
    }
    study, run_id = submit_one(live, spec)
    seen: set[str] = set()

    def study_ended_and_counted(m) -> bool:
        # the study's end and its runs' counts are two messages, in either order
        if m.get("state") in ("completed_with_failures", "completed"):
            seen.add("study")
        if m["type"] == "runs" and m.get("progress") == {"failed": 1}:
            seen.add("runs")
        return seen == {"study", "runs"}

    messages = asyncio.run(
        collect(ws_url(live, f"/ws/studies/{study['id']}/"), until=study_ended_and_counted)
    )
    for m in messages:
        validate(LIVE_MESSAGES, m, definition="LiveMessage", what="the message")
    run = Run.objects.get(pk=run_id)
    assert run.state == "failed" and run.end_reason == "diverged", (
        run.state,
        run.end_reason,
        run.message,
    )
    assert run.trust == "diverged"
    assert "courant.max" in run.message and "above 5" in run.message
    assert usage_for_tenant(tenant_id=live.tenant.id).cores == 0
    last = [m for m in messages if m["type"] == "runs"][-1]
    assert last["progress"] == {"failed": 1}
    detail = live.get(f"/api/v1/runs/{run_id}/").json()
    assert detail["trust"] == "diverged" and detail["end_reason"] == "diverged"


def test_a_converging_case_stops_early_under_a_window_tolerance(live):
    spec = {
        "name": "early",
        "template": "airfoil2d",
        "parameters": {"aoa": 4, "iterations": 1000},
        "convergence": {
            "converge": {
                "objective": {"series": "forceCoeffs.Cl", "window": 30, "tolerance": 2e-3}
            },
            "min_iterations": 40,
        },
    }
    study, run_id = submit_one(live, spec)
    wait_for(
        lambda: Run.objects.get(pk=run_id).state in ("completed", "failed"),
        timeout=240,
        what="the run to end",
    )
    run = Run.objects.get(pk=run_id)
    assert run.state == "completed" and run.end_reason == "converged", (
        run.state,
        run.end_reason,
        run.message,
    )
    assert run.trust == "converged"
    assert run.iterations is not None and 40 <= run.iterations < 400, run.iterations
    assert "forceCoeffs.Cl changed" in run.message
    assert run.objectives["Cl"] == pytest.approx(0.5, abs=0.2)
    wait_for(  # once the stopped agent's final report is in, its files can be archived
        lambda: live.get(f"/api/v1/runs/{run_id}/").json()["archive_available"],
        timeout=60,
        what="the archive of the stopped run",
    )
    archive = live.get(f"/api/v1/runs/{run_id}/archive/")
    assert archive.status_code == 200 and len(archive.content) > 1000
    results = live.get(f"/api/v1/studies/{study['id']}/results/").json()
    assert results["rows"][0]["trust"] == "converged"
    assert "trust" in live.get(f"/api/v1/studies/{study['id']}/results.csv").text.splitlines()[0]


def test_invalid_policies_are_clear_400s(live):
    spec = {
        "name": "bad",
        "template": "cavity",
        "convergence": {"converge": {"objective": {"window": 3}}},
    }
    r = live.post("/api/v1/studies/preview/", json=spec)
    assert r.status_code == 400 and r.json()["field"] == "convergence.converge.objective.series"
    r = live.post(
        "/api/v1/studies/preview/",
        json={**spec, "convergence": {"diverge": {"growth": {"factor": 0.5}}}},
    )
    assert r.status_code == 400 and "factor" in r.json()["field"]


def test_an_agent_reports_live_only_while_someone_watches_its_run(live, make_tenant):
    """The ingest answers pace the agent: the idle interval while nobody is subscribed to the
    run, the live one while a client of the run's tenant is; a refused stranger changes nothing."""
    import secrets

    from django.conf import settings
    from django.utils import timezone

    from catalog.models import Backend
    from studies.services import study_create
    from studies.transitions import hash_run_token

    Backend.objects.update_or_create(
        name="noop", defaults={"kind": "noop", "cores": 64, "memory_gb": 256, "max_nodes": 1}
    )
    spec = {"name": "paced", "template": "cavity", "backend": "noop"}
    study = study_create(tenant=live.tenant, owner=live.tenant.user, spec=spec, submit=True)
    run = Run.objects.get(study=study)
    token = secrets.token_urlsafe(16)
    Run.objects.filter(pk=run.pk).update(
        state="running", attempt=1, token_hash=hash_run_token(token), started_at=timezone.now()
    )

    def interval() -> float:
        r = live.post(
            f"/api/v1/ingest/runs/{run.pk}/telemetry/",
            json={"attempt": 1, "series": {"residual.p": [[1, 0.5]]}, "log": []},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert r.status_code == 200, r.text
        return r.json()["interval"]

    idle, fast = (settings.WINDTUNNEL[k] for k in ("TELEMETRY_IDLE_INTERVAL", "TELEMETRY_INTERVAL"))
    assert idle > fast
    assert interval() == idle
    stranger = api_token_create(user=make_tenant().user)

    async def refused_then_watched() -> tuple[float, float]:
        async with websockets.connect(ws_url(live, f"/ws/runs/{run.pk}/", stranger)) as ws:
            with pytest.raises(websockets.ConnectionClosed):
                async with asyncio.timeout(10):
                    while True:
                        await ws.recv()
        after_stranger = await asyncio.to_thread(interval)
        async with websockets.connect(ws_url(live, f"/ws/runs/{run.pk}/")) as ws:
            assert json.loads(await ws.recv())["type"] == "subscribed"
            watched = await asyncio.to_thread(
                lambda: wait_for(lambda: interval() == fast, timeout=10, what="live pace")
            )
        return after_stranger, watched

    after_stranger, watched = asyncio.run(refused_then_watched())
    assert after_stranger == idle
    assert watched
