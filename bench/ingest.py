"""ingest_ratio: telemetry points per second through the portal's ingest API (HTTP → DRF →
PostgreSQL chunks → live events) vs a bare PostgreSQL COPY of the same points, same run.

Sustained throughput, as agents drive it: 20 agents' own reporters (the agent's Reporter and
PortalClient, posting every telemetry interval whatever accumulated since) fed by 20 producer
threads that emit 8 series as fast as they can. A second figure keeps the request rate for
fixed small batches (20 clients posting 8 series × 50 points, no batching), the latency-bound
case.
"""

from __future__ import annotations

import concurrent.futures
import io
import time

import httpx

from bench.common import (
    emit,
    fresh_stack,
    noop_study,
    progress,
    setup_django,
    sized,
    started_runs,
)

RUNS, SERIES, POINTS, BATCHES = sized(20, 2), 8, 50, sized(40, 4)
SUSTAINED_POINTS = sized(5_000, 200)  # per series and agent: 20 × 8 × 5,000 = 800,000 points


def sustained(stack, tokens: dict[str, str]) -> float:
    """Points/s through the agents' own reporters, producers outrunning the portal."""
    from orchestration.agent.client import PortalClient
    from orchestration.agent.reporter import Reporter

    reporters = []
    for run_id, token in tokens.items():
        client = PortalClient(portal_url=stack.url, run_id=run_id, token=token, attempt=1)
        reporters.append(Reporter(client=client, heartbeat_interval=5.0, telemetry_interval=0.25))

    def produce(reporter) -> None:
        for start in range(0, SUSTAINED_POINTS, POINTS):
            reporter.add_points(
                (f"residual.s{s}", float(i), 0.5 / (1 + i))
                for s in range(SERIES)
                for i in range(start, start + POINTS)
            )

    total = len(reporters) * SERIES * SUSTAINED_POINTS
    t0 = time.perf_counter()
    for r in reporters:
        r.start()
    with concurrent.futures.ThreadPoolExecutor(len(reporters)) as pool:
        list(pool.map(produce, reporters))
    for r in reporters:
        r.close()
    for r in reporters:
        if not r.flush(deadline=time.monotonic() + 300):
            raise SystemExit("a reporter could not deliver its points")
    return total / (time.perf_counter() - t0)


def main() -> None:
    setup_django()
    from django.db import connection

    study = noop_study(name="ingest", parameters={"lid_velocity": {"linspace": [1, 2, RUNS]}})
    tokens = started_runs(study)
    stack = fresh_stack()
    stack.start_web()
    total_points = RUNS * BATCHES * SERIES * POINTS

    def agent(run_id: str) -> None:
        with httpx.Client(
            base_url=f"{stack.url}/api/v1/ingest/runs/{run_id}/",
            headers={"Authorization": f"Bearer {tokens[run_id]}"},
            timeout=60,
        ) as client:
            for b in range(BATCHES):
                series = {
                    f"residual.f{s}": [
                        [b * POINTS + i, 0.5 / (1 + b * POINTS + i)] for i in range(POINTS)
                    ]
                    for s in range(SERIES)
                }
                r = client.post(
                    "telemetry/?attempt=1",  # as the agent does: the attempt in the URL too
                    json={"attempt": 1, "series": series, "log": [f"Time = {b}"]},
                )
                r.raise_for_status()

    try:
        progress(
            f"fixed small batches: {RUNS} clients × {BATCHES} × {SERIES} series × {POINTS} points"
        )
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(RUNS) as pool:
            list(pool.map(agent, tokens))
        small_s = time.perf_counter() - t0
        progress(
            f"sustained: {RUNS} agents' reporters, {SERIES} series × {SUSTAINED_POINTS:,} points each"
        )
        portal_rate = sustained(stack, tokens)
    finally:
        stack.stop()
    small_rate = total_points / small_s

    buf = io.StringIO()
    for run_id in tokens:
        for b in range(BATCHES):
            for s in range(SERIES):
                for i in range(POINTS):
                    buf.write(
                        f"{run_id}\tresidual.f{s}\t{b * POINTS + i}\t{0.5 / (1 + b * POINTS + i)}\n"
                    )
    data = buf.getvalue()
    copies = []
    with connection.cursor() as cur:
        for attempt in range(3):  # the best of three: the baseline is the fastest it can be
            cur.execute(
                f"CREATE TEMP TABLE bench_points{attempt} (run uuid, name text, x float8, y float8)"
            )
            t1 = time.perf_counter()
            with cur.cursor.copy(f"COPY bench_points{attempt} FROM STDIN") as copy:
                copy.write(data)
            copies.append(time.perf_counter() - t1)
    copy_s = min(copies)
    copy_rate = total_points / copy_s
    ratio = portal_rate / copy_rate
    progress(
        f"portal sustained {portal_rate:,.0f} points/s; fixed 8×50 batches {small_rate:,.0f} points/s "
        f"({RUNS * BATCHES / small_s:,.0f} requests/s); COPY {copy_rate:,.0f} points/s ({copy_s:.2f} s)"
    )
    emit(
        "ingest_ratio",
        ratio,
        "x",
        f"portal/COPY,{portal_rate:,.0f} vs {copy_rate:,.0f} points/s,{RUNS} agents' reporters; "
        f"fixed {SERIES}x{POINTS} batches {small_rate:,.0f} points/s",
        portal_points_per_s=portal_rate,
        small_batch_points_per_s=small_rate,
        small_batch_requests_per_s=RUNS * BATCHES / small_s,
        copy_points_per_s=copy_rate,
    )


if __name__ == "__main__":
    main()
