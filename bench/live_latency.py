"""live_latency_p95_ms and live_latency_p99_ms: from a residual line written to a solver's log
to its point arriving in a websocket client, with 20 runs streaming at once and 50 clients
connected.

The runs use a stand-in solver (bench/fake_solver.py) that stamps the wall time of every line
it writes; everything after it is the real path: agent log follower, ingest HTTP API,
PostgreSQL, the Redis channel layer, uvicorn, the websocket.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid
from pathlib import Path

import psutil
import websockets

from bench.common import ROOT, emit, fresh_stack, progress, setup_django, sized

RUNS, CLIENTS, STEPS, PERIOD = sized(20, 2), sized(50, 3), sized(200, 20), 0.05


async def client(url: str, run_id: str, seen: list, done: asyncio.Event) -> None:
    async with websockets.connect(url, open_timeout=60, max_size=None) as ws:
        while not done.is_set():
            try:
                raw = await asyncio.wait_for(ws.recv(), timeout=1)
            except TimeoutError:
                continue
            now = time.time()
            message = json.loads(raw)
            if message.get("type") == "telemetry":
                for x, _ in message["series"].get("residual.Ux", []):
                    seen.append((run_id, int(x), now))


async def watch(urls: list[tuple[str, str]], finished) -> list:
    seen: list = []
    done = asyncio.Event()
    tasks = [asyncio.create_task(client(url, run_id, seen, done)) for url, run_id in urls]
    await asyncio.sleep(2)  # every client subscribed before the runs start writing
    start_event.set()
    while not await asyncio.to_thread(finished):
        await asyncio.sleep(0.5)
    await asyncio.sleep(1)
    done.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return seen


start_event = None  # set by main: the runs are released once every client is connected


def main() -> None:
    global start_event
    import threading

    setup_django()
    from django.conf import settings

    from catalog.models import Backend
    from quotas.services import tenant_provision
    from studies.choices import TERMINAL_STATES
    from studies.models import Run, Study
    from studies.services import study_create
    from tenancy.services import api_token_create

    Backend.objects.filter(name="local").update(cores=RUNS * 2, memory_gb=256)
    tenant = tenant_provision(
        name="bench-live",
        username="bench-live",
        quota={"cores": RUNS, "memory_gb": 256, "max_runs": RUNS},
    )
    user = tenant.memberships.get().user
    Run.objects.filter(tenant=tenant).delete()
    token = api_token_create(user=user)
    study = study_create(
        tenant=tenant,
        owner=user,
        spec={
            "name": "live latency",
            "template": "cavity",
            "reuse": False,  # measured runs are computed, never reused
            "parameters": {"lid_velocity": {"linspace": [1, 2, RUNS]}},
        },
    )
    stack = fresh_stack()
    stack.start_web()
    start_event = threading.Event()
    try:
        from studies.services import study_submit

        study.refresh_from_db()
        study_submit(study=study)  # queued: no worker runs yet, so nothing starts
        # the runs' command: the stand-in solver (read at dispatch, after submission resolved the spec)
        Study.objects.filter(pk=study.pk).update(
            steps=[
                {
                    "name": "fakeFoam",
                    # the system's python3 and the script's text: the case's sandbox shows
                    # the system read-only, not the portal's folders or its virtualenv
                    "argv": [
                        "python3",
                        "-c",
                        (ROOT / "bench" / "fake_solver.py").read_text(),
                        str(STEPS),
                        str(PERIOD),
                    ],
                    "role": "solve",
                }
            ]
        )
        run_ids = [
            str(r)
            for r in Run.objects.filter(study=study).order_by("index").values_list("id", flat=True)
        ]
        base = stack.url.replace("http://", "ws://")
        urls = [
            (f"{base}/ws/runs/{run_ids[i % RUNS]}/?token={token}", run_ids[i % RUNS])
            for i in range(CLIENTS)
        ]

        def finished() -> bool:
            return not Run.objects.filter(study=study).exclude(state__in=TERMINAL_STATES).exists()

        result: dict = {}
        watcher = threading.Thread(
            target=lambda: result.update(seen=asyncio.run(watch(urls, finished)))
        )
        watcher.start()
        if not start_event.wait(120):
            raise SystemExit("websocket clients did not connect")
        progress(f"{CLIENTS} clients connected; starting the worker: {RUNS} runs go")
        web = psutil.Process(stack.web.pid)
        web_cpu0, streaming0 = sum(web.cpu_times()[:2]), time.monotonic()
        stack.start_worker()
        watcher.join()
        # the web process's CPU while the runs streamed (ingest, fan-out, websockets)
        web_cpu = sum(web.cpu_times()[:2]) - web_cpu0
        streaming_s = time.monotonic() - streaming0
        seen = result["seen"]
        states = set(Run.objects.filter(study=study).values_list("state", flat=True))
        if states != {"completed"}:
            raise SystemExit(f"runs ended as {states}")
    finally:
        stack.stop()

    stamps: dict[tuple[str, int], float] = {}
    attempts = dict(Run.objects.filter(study=study).values_list("id", "attempt"))
    for run_id in run_ids:
        attempt = attempts[uuid.UUID(run_id)]
        path = Path(settings.RUNS_DIR) / run_id / f"attempt-{attempt}" / "case" / "stamps.txt"
        for line in path.read_text().splitlines():
            k, t = line.split()
            stamps[(run_id, int(k))] = float(t)
    latencies = sorted(
        (arrived - stamps[(run_id, x)]) * 1000
        for run_id, x, arrived in seen
        if (run_id, x) in stamps
    )
    if not latencies:
        raise SystemExit("no points arrived")

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))]

    p50, p95, p99 = pct(50), pct(95), pct(99)
    # the same once every run has streamed for a second: the start (20 agents, sandboxes and
    # solvers starting at once on the 2 cores, and their `running` reports) apart
    first = {}
    for (run_id, _), t in stamps.items():
        first[run_id] = min(first.get(run_id, t), t)
    steady = sorted(
        (arrived - stamps[(run_id, x)]) * 1000
        for run_id, x, arrived in seen
        if (run_id, x) in stamps and stamps[(run_id, x)] - first[run_id] >= 1.0
    )
    p95_steady = steady[min(len(steady) - 1, int(0.95 * len(steady)))] if steady else float("nan")
    # where the time goes: log line → stored (follower, batching, HTTP, PostgreSQL) and
    # stored → client (channel layer, websocket), from each chunk's commit time
    from telemetry.models import SeriesChunk

    stored: dict[tuple[str, int], float] = {}
    batch_keys: list[tuple[str, int]] = []
    for run_id, seq, xs, created in SeriesChunk.objects.filter(
        run__study=study, name="residual.Ux"
    ).values_list("run_id", "seq", "xs", "created_at"):
        batch_keys.append((str(run_id), seq))
        for x in xs:
            stored[(str(run_id), int(x))] = created.timestamp()
    to_db = sorted((stored[k] - stamps[k]) * 1000 for k in stored if k in stamps)
    to_client = sorted(
        (arrived - stored[(run_id, x)]) * 1000
        for run_id, x, arrived in seen
        if (run_id, x) in stored
    )

    # the agents' batches (one chunk of residual.Ux each) and what each cost the web process
    batches = len(set(batch_keys))
    cpu_per_batch_ms = web_cpu / batches * 1000 if batches else float("nan")

    def p95_of(values: list[float]) -> float:
        return values[min(len(values) - 1, int(0.95 * len(values)))] if values else float("nan")

    progress(
        f"{len(latencies)} point arrivals: p50 {p50:.0f} ms, p95 {p95:.0f} ms, p99 {p99:.0f} ms, mean {statistics.mean(latencies):.0f} ms"
        f" (p95 after each run's first second {p95_steady:.0f} ms);"
        f" p95 line→stored {p95_of(to_db):.0f} ms, stored→client {p95_of(to_client):.0f} ms;"
        f" {batches} batches ({batches / streaming_s:.0f}/s), web process CPU {web_cpu:.1f} s"
        f" ({cpu_per_batch_ms:.2f} ms a batch, fan-out and websockets included)"
    )
    emit(
        "live_latency_p95_ms",
        p95,
        "ms",
        f"log line→websocket client,{RUNS} runs streaming,{CLIENTS} clients,p50 {p50:.0f} p99 {p99:.0f}"
        f",p95 after each run's first second {p95_steady:.0f}",
        p50_ms=p50,
        p99_ms=p99,
        p95_after_first_second_ms=p95_steady,
        p95_line_to_stored_ms=p95_of(to_db),
        p95_stored_to_client_ms=p95_of(to_client),
        arrivals=len(latencies),
        batches=batches,
        batches_per_s=batches / streaming_s,
        web_cpu_s=web_cpu,
        web_cpu_per_batch_ms=cpu_per_batch_ms,
    )
    emit(
        "live_latency_p99_ms",
        p99,
        "ms",
        f"log line→websocket client,{RUNS} runs streaming,{CLIENTS} clients,p50 {p50:.0f} p95 {p95:.0f}",
        p50_ms=p50,
        p95_ms=p95,
        arrivals=len(latencies),
    )


if __name__ == "__main__":
    main()
