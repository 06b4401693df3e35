"""ingest_ratio: telemetry points per second through the portal's ingest API (HTTP → DRF →
PostgreSQL chunks → live events) vs a bare PostgreSQL COPY of the same points, same run.

20 simulated agents post batches of 8 series × 50 points concurrently for a fixed count.
"""

from __future__ import annotations

import concurrent.futures
import io
import secrets
import time

import httpx

from bench.common import emit, fresh_stack, noop_study, progress, setup_django

RUNS, SERIES, POINTS, BATCHES = 20, 8, 50, 40


def main() -> None:
    setup_django()
    from django.db import connection
    from django.utils import timezone

    from studies.models import Simulation
    from studies.services import hash_run_token

    study = noop_study(name="ingest", parameters={"lid_velocity": {"linspace": [1, 2, RUNS]}})
    tokens = {}
    for run in Simulation.objects.filter(study=study):
        tokens[str(run.pk)] = secrets.token_urlsafe(16)
        Simulation.objects.filter(pk=run.pk).update(
            state="running",
            attempt=1,
            token_hash=hash_run_token(tokens[str(run.pk)]),
            started_at=timezone.now(),
        )
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
                    "telemetry/", json={"attempt": 1, "series": series, "log": [f"Time = {b}"]}
                )
                r.raise_for_status()

    try:
        progress(
            f"{RUNS} agents × {BATCHES} batches × {SERIES} series × {POINTS} points = {total_points:,} points"
        )
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(RUNS) as pool:
            list(pool.map(agent, tokens))
        portal_s = time.perf_counter() - t0
    finally:
        stack.stop()
    portal_rate = total_points / portal_s

    buf = io.StringIO()
    for run_id in tokens:
        for b in range(BATCHES):
            for s in range(SERIES):
                for i in range(POINTS):
                    buf.write(
                        f"{run_id}\tresidual.f{s}\t{b * POINTS + i}\t{0.5 / (1 + b * POINTS + i)}\n"
                    )
    data = buf.getvalue()
    with connection.cursor() as cur:
        cur.execute("CREATE TEMP TABLE bench_points (run uuid, name text, x float8, y float8)")
        t1 = time.perf_counter()
        with cur.cursor.copy("COPY bench_points FROM STDIN") as copy:
            copy.write(data)
        copy_s = time.perf_counter() - t1
    copy_rate = total_points / copy_s
    ratio = portal_rate / copy_rate
    progress(
        f"portal {portal_rate:,.0f} points/s ({portal_s:.2f} s); COPY {copy_rate:,.0f} points/s ({copy_s:.2f} s)"
    )
    emit(
        "ingest_ratio",
        ratio,
        "x",
        f"portal/COPY,{portal_rate:,.0f} vs {copy_rate:,.0f} points/s,{RUNS} agents batches of {SERIES}x{POINTS}",
        portal_points_per_s=portal_rate,
        copy_points_per_s=copy_rate,
        points=total_points,
        target=">= 0.25 and >= 20000 points/s",
    )


if __name__ == "__main__":
    main()
