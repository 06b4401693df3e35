"""Where the portal's CPU goes per agent request (a profiling aid, not a target).

A real cavity case is solved once; then N runs of a study on the no-op backend get, from two
agent-like threads with the agent's own PortalClient, the requests one run's agent makes:
`running`, the solve's telemetry, the end. CPU of the web process and of PostgreSQL is read
from /proc between the phases and printed per run.
"""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

from bench.common import (
    ROOT,
    emit,
    fresh_stack,
    noop_study,
    progress,
    setup_django,
    sized,
    started_runs,
)

RUNS = sized(int(os.environ.get("WT_BENCH_RUNS", "72")), 8)
WARM_UP = sized(8, 2)


def _cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def _postgres() -> list[int]:
    return [p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "postgres"]


def _solved_case(tmp: Path) -> tuple[str, dict]:
    """The log text and function-object columns of one real 0.5 s cavity run."""
    from orchestration.case.render import render_case
    from orchestration.results.dat import DatFollower

    case = tmp / "case"
    context = {"lid_velocity": 1.0, "cells": 40, "end_time": 0.5}
    from studies.spec import spec_resolve
    from tenancy.models import Tenant

    tenant = Tenant.objects.get(name="bench-request-cpu")
    spec = {"name": "x", "template": "cavity", "parameters": context, "reuse": False}
    (_, full), *_ = spec_resolve(tenant=tenant, spec=spec).points()
    render_case(ROOT / "templates" / "cavity", case, full)
    env = {**os.environ, "WM_PROJECT_DIR": "/usr/share/openfoam"}
    for step in ("blockMesh", "icoFoam"):
        with (case / f"log.{step}").open("wb") as log:
            subprocess.run(
                [step], cwd=case, env=env, stdout=log, stderr=subprocess.STDOUT, check=True
            )
    return (case / "log.icoFoam").read_text(), DatFollower(case).poll_columns()


def main() -> None:
    setup_django()

    from orchestration.agent.client import PortalClient
    from orchestration.agent.reporter import Reporter
    from orchestration.results.logparse import LogParser
    from studies.models import Run

    study = noop_study(name="request-cpu", parameters={"lid_velocity": {"linspace": [1, 2, RUNS]}})
    with tempfile.TemporaryDirectory() as tmp:
        log_text, dat = _solved_case(Path(tmp))
    parser = LogParser()
    columns = parser.feed_block(log_text)
    for name, (xs, ys) in [*parser.flush_block().items(), *dat.items()]:
        columns.setdefault(name, ([], []))[0].extend(xs)
        columns[name][1].extend(ys)
    points = sum(len(xs) for xs, _ in columns.values())
    tokens = started_runs(study, state="provisioning")
    stack = fresh_stack()
    stack.start_web()
    clients = {
        run_id: PortalClient(portal_url=stack.url, run_id=run_id, token=token, attempt=1)
        for run_id, token in tokens.items()
    }

    def running(client) -> None:
        client.post("state/", {"state": "running", "exit_code": None, "reason": "", "message": ""})

    def final(client) -> None:
        """What the agent sends at the end of a run nobody watches (shorter than the 2 s
        telemetry pace): its final report carrying the whole batch."""
        reporter = Reporter(client=client, heartbeat_interval=5, telemetry_interval=2)
        reporter.add_columns({k: (list(xs), list(ys)) for k, (xs, ys) in columns.items()})
        reporter.add_log_text(log_text)
        assert reporter.flush(deadline=time.monotonic() + 60, keep_last=True)
        body = {"state": "completed", "exit_code": 0, "reason": "", "message": ""}
        client.post("state/", {**body, **reporter.take_batch()})

    web = [stack.web.pid]
    results = {}
    phases = (("running", running), ("final", final))
    try:
        time.sleep(1)
        warm = list(clients.values())[:WARM_UP]  # connections, caches, lazy imports
        for _, call in phases:
            for client in warm:
                call(client)
        measured = list(clients.values())[WARM_UP:]
        for name, call in phases:
            pg = _postgres()
            w0, p0, t0 = _cpu(web), _cpu(pg), time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                list(pool.map(call, measured))
            wall = time.perf_counter() - t0
            w1, p1 = _cpu(web), _cpu(pg)
            results[name] = ((w1 - w0) * 1000 / len(measured), (p1 - p0) * 1000 / len(measured))
            progress(
                f"{name:10s} web {results[name][0]:6.2f} ms  postgres {results[name][1]:6.2f} ms"
                f" per run ({wall * 1000 / len(measured):.1f} ms wall per run, 2 at a time)"
            )
    finally:
        stack.stop()
    states = set(Run.objects.filter(study=study).values_list("state", flat=True))
    assert states == {"completed"}, states
    total = sum(w + p for w, p in results.values())
    emit(
        "request_cpu_ms_per_run",
        total,
        "ms",
        f"web+postgres CPU per run for one run's agent requests ({points} points),"
        + ",".join(f"{k} {w:.1f}+{p:.1f}" for k, (w, p) in results.items()),
        parts=results,
        points=points,
    )


def fixed_cost() -> None:
    """CPU of the web process per request for /healthz and for a heartbeat (one statement)."""
    setup_django()
    from django.utils import timezone

    from orchestration.agent.client import PortalClient
    from studies.models import Run
    from studies.transitions import hash_run_token, run_token

    study = noop_study(name="request-cpu", parameters={"lid_velocity": {"linspace": [1, 2, 2]}})
    run = Run.objects.filter(study=study).first()
    token = run_token(run_id=run.pk, attempt=1)  # as dispatch gives it
    Run.objects.filter(pk=run.pk).update(
        state="running", attempt=1, token_hash=hash_run_token(token), heartbeat_at=timezone.now()
    )
    stack = fresh_stack()
    stack.start_web()
    client = PortalClient(portal_url=stack.url, run_id=str(run.pk), token=token, attempt=1)
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", stack.port)
    try:
        for name, call in (
            ("healthz", lambda: (conn.request("GET", "/healthz"), conn.getresponse().read())),
            ("heartbeat", lambda: client.post("heartbeat/", {"phase": "solving"})),
        ):
            for _ in range(50):
                call()
            w0 = _cpu([stack.web.pid])
            for _ in range(500):
                call()
            progress(
                f"{name}: {(_cpu([stack.web.pid]) - w0) * 1000 / 500:.2f} ms web CPU per request"
            )
    finally:
        stack.stop()


if __name__ == "__main__":
    fixed_cost() if os.environ.get("WT_BENCH_FIXED") else main()
