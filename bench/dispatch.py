"""dispatch_rate: runs admitted and dispatched per second, through the real scheduler and a
real Celery worker, on the no-op backend (so only the portal's own work is measured).

Baseline in the same run: the same number of single-row INSERTs into PostgreSQL, the floor
of "one write per run" on this machine (printed for context).
"""

from __future__ import annotations

import os
import time

from bench.common import emit, fresh_stack, progress, setup_django, sized

RUNS = sized(2000, 60)


def main() -> None:
    # noop runs never report: keep the reaper from requeueing them while we measure
    os.environ["WINDTUNNEL_HEARTBEAT_TIMEOUT"] = os.environ["WINDTUNNEL_DISPATCH_TIMEOUT"] = "3600"
    setup_django()
    from django.db import connection

    from catalog.models import Backend
    from quotas.services import tenant_provision
    from studies.models import Run
    from studies.services import study_create

    Backend.objects.update_or_create(
        name="noop", defaults={"kind": "noop", "cores": 1_000_000, "memory_gb": 1e6, "max_nodes": 1}
    )
    tenant = tenant_provision(
        name="bench-dispatch",
        username="bench-dispatch",
        quota={"cores": 100_000, "memory_gb": 1e6, "max_runs": 100_000, "max_queued_runs": 100_000},
    )
    user = tenant.memberships.get().user
    Run.objects.filter(tenant=tenant).delete()

    stack = fresh_stack()
    stack.start_worker()
    try:
        time.sleep(3)  # let the worker connect
        # the submission below stands in for the web process's, which makes at start-up what
        # a submission needs (the task modules and the broker connection, the spec's schema):
        # this process does the same now, not inside the timing
        from config.startup import web_process_warm_up

        web_process_warm_up()
        spec = {
            "name": "dispatch bench",
            "template": "cavity",
            "reuse": False,  # measured runs are computed, never reused
            "backend": "noop",
            "parameters": {"lid_velocity": {"linspace": [0.1, 10, RUNS]}},
        }
        progress(f"submitting {RUNS} runs on the noop backend")
        t0 = time.perf_counter()
        study = study_create(tenant=tenant, owner=user, spec=spec, submit=True)
        t_submit = time.perf_counter() - t0
        samples = []
        while True:
            n = Run.objects.filter(study=study, attempt__gte=1).count()
            samples.append((round(time.perf_counter() - t0, 3), n))
            if n >= RUNS:
                break
            if time.perf_counter() - t0 > 600:
                raise SystemExit(f"only {n} of {RUNS} dispatched after 600 s")
            time.sleep(0.05)
        elapsed = time.perf_counter() - t0
    finally:
        stack.stop()

    with connection.cursor() as cur:
        cur.execute("CREATE TEMP TABLE bench_rows (id int, v text)")
        t1 = time.perf_counter()
        for i in range(RUNS):
            cur.execute("INSERT INTO bench_rows VALUES (%s, %s)", [i, "x"])
        insert_rate = RUNS / (time.perf_counter() - t1)
    rate = RUNS / elapsed
    progress(
        f"submit (validate + create {RUNS} runs) {t_submit:.2f} s; all dispatched after {elapsed:.2f} s"
    )
    emit(
        "dispatch_rate",
        rate,
        "runs/s",
        f"{RUNS} noop runs submit→dispatched via Celery, baseline {insert_rate:.0f} single INSERTs/s",
        runs=RUNS,
        elapsed_s=elapsed,
        submit_s=t_submit,
        baseline_insert_rate=insert_rate,
        samples=samples,
    )


if __name__ == "__main__":
    main()
