"""admission_flatness: what one scheduling pass costs with 100,000 runs queued across five
tenants, divided by what it costs with 1,000 queued: a pass should cost what it admits, not
what waits.

Five tenants, each with two studies on the no-op backend and a quota of two runs at a time.
A pass is what the beat tick and every run's end do: find the tenants with queued runs, then
admit each one's runs that fit (ten in all), and tell the rest why they wait. The first pass,
a few seconds after the submissions, settles the queues' wait reasons (committed; its runs
go back to the queue; the passes after it find nothing new to tell), then the same
pass is timed several times inside a transaction that is rolled back, so every timed pass
admits the same ten runs out of the same queue. Reported: the median pass at each size and
their ratio; the CPU of the database's backend process beside it (the host's load moves wall
time, the work it takes barely).
"""

from __future__ import annotations

import statistics
import time

import psutil

from bench.common import emit, progress, setup_django, sized
from bench.figures import threshold

SIZES = [sized(1_000, 1_000), sized(100_000, 10_000)]
TENANTS = 5
REPEAT = sized(9, 9)
TARGET = threshold("admission_flatness")


class _Rollback(Exception):
    pass


def fill(total: int) -> list[int]:
    """Five tenants with `total` queued runs between them (two studies each); their ids."""
    from catalog.models import Backend
    from quotas.services import tenant_provision
    from studies.models import Run, Study
    from studies.services import study_create

    Backend.objects.update_or_create(
        name="noop", defaults={"kind": "noop", "cores": 10_000, "memory_gb": 1e6, "max_nodes": 1}
    )
    ids = []
    per_study = total // (2 * TENANTS)
    for t in range(TENANTS):
        tenant = tenant_provision(
            name=f"bench-admission-{t}",
            username=f"bench-admission-{t}",
            quota={"cores": 64, "memory_gb": 256, "max_runs": 2, "max_queued_runs": total},
        )
        Run.objects.filter(tenant=tenant).delete()
        Study.objects.filter(tenant=tenant).delete()
        user = tenant.memberships.get().user
        for s in range(2):
            study_create(
                tenant=tenant,
                owner=user,
                submit=True,
                spec={
                    "name": f"queue {s}",
                    "template": "cavity",
                    "reuse": False,  # measured runs are computed, never reused
                    "backend": "noop",
                    "parameters": {"lid_velocity": {"linspace": [0.1, 10, per_study]}},
                },
            )
        ids.append(tenant.pk)
    return ids


def one_pass() -> int:
    from scheduler.admission import admit, tenants_with_queued_runs

    return sum(len(admit(tenant_id=t, publish=False)) for t in tenants_with_queued_runs())


def measure(total: int) -> dict[str, float]:
    from django.db import connection, transaction

    from studies.models import Run

    progress(f"{total:,} queued runs across {TENANTS} tenants")
    tenants = fill(total)
    # a queue that has waited a moment: the passes right after a submission write the new
    # runs' wait reasons (they cost what was queued), the ones after it do not
    time.sleep(3)
    with connection.cursor() as cursor:  # what autovacuum does within its first minute
        cursor.execute("ANALYZE studies_run")
    one_pass()  # settles every queued run's wait reason, as the first tick would
    Run.objects.filter(tenant_id__in=tenants, state="admitted").update(
        state="pending", admitted_at=None
    )
    connection.ensure_connection()
    backend = psutil.Process(connection.connection.info.backend_pid)
    walls, cpus, admitted = [], [], 0
    for _ in range(REPEAT):
        try:
            with transaction.atomic():
                before = backend.cpu_times()
                t0 = time.perf_counter()
                admitted = one_pass()
                walls.append(time.perf_counter() - t0)
                after = backend.cpu_times()
                cpus.append((after.user + after.system) - (before.user + before.system))
                raise _Rollback
        except _Rollback:
            pass
    Run.objects.filter(tenant_id__in=tenants).delete()
    out = {
        "pass_ms": 1000 * statistics.median(walls),
        "db_cpu_ms": 1000 * statistics.median(cpus),
        "admitted": admitted,
    }
    progress(f"{total:,} queued: {out}")
    return out


def main() -> None:
    setup_django()
    from django.conf import settings

    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "MAX_RUNS_PER_STUDY": max(SIZES)}
    small, large = (measure(n) for n in SIZES)
    ratio = large["pass_ms"] / small["pass_ms"]
    verdict = f"meets ≤ {TARGET:g}" if ratio <= TARGET else f"MISSES ≤ {TARGET:g}"
    emit(
        "admission_flatness",
        ratio,
        "x",
        f"one scheduling pass (5 tenants, {int(large['admitted'])} runs admitted) with "
        f"{SIZES[1]:,} runs queued: {large['pass_ms']:.1f} ms (database {large['db_cpu_ms']:.1f}"
        f" ms CPU) ÷ with {SIZES[0]:,}: {small['pass_ms']:.1f} ms ({small['db_cpu_ms']:.1f} ms); "
        f"{verdict}",
        sizes=SIZES,
        results={"small": small, "large": large},
    )


if __name__ == "__main__":
    main()
