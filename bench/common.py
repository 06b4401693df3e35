"""Shared benchmark plumbing: Django set-up, the BENCH line and the JSON result file.

Every benchmark compares against a baseline measured in the same run (machines here are
shared and noisy: ratios hold, absolute times do not).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import record
from bench.figures import FIGURES

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
# `make bench SMOKE=1` (CI runs every benchmark once this way): the same code paths on a few
# runs, to keep the benchmarks from rotting; its figures say nothing and are marked (smoke)
SMOKE = os.environ.get("WT_BENCH_SMOKE", "") not in ("", "0")


def sized(full: int, smoke: int) -> int:
    """A benchmark's size: `full` for a measurement, `smoke` in smoke mode."""
    return smoke if SMOKE else full


@contextlib.contextmanager
def started(service: str) -> Iterator[None]:
    """A heavy test service the benchmark needs (`slurm`, `openstack`), started with a lease
    on this process (scripts/start-<service> --lease) and stopped after unless another
    session still holds it. A service that fails to start ends the benchmark with its error."""
    lease = str(os.getpid())  # a lease counts while its process lives
    subprocess.run([str(ROOT / f"scripts/start-{service}"), "--lease", lease], check=True)
    try:
        yield
    finally:
        subprocess.run([str(ROOT / f"scripts/stop-{service}"), "--lease", lease], check=False)


def setup_django() -> None:
    sys.path[:0] = [str(ROOT / "backend"), str(ROOT)]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import logging

    import django

    django.setup()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("sync_catalog", verbosity=0)
    clear_leftovers()


def clear_leftovers() -> None:
    """Runs an earlier benchmark left unfinished (its portal is gone; a later benchmark's
    worker would otherwise dispatch its queued runs, or wait for capacity its silent runs
    hold) are cancelled here, and their agents on this machine stopped."""
    from django.utils import timezone

    from catalog.models import Backend
    from compute.drivers import driver_for
    from studies.choices import ENDED_STUDY_STATES, TERMINAL_STATES, StudyState
    from studies.models import Run, Study

    left = Run.objects.exclude(state__in=TERMINAL_STATES)
    for backend, handle in left.exclude(handle="").values_list("backend", "handle"):
        with contextlib.suppress(Exception):  # best effort: the run ends below regardless
            driver_for(Backend.objects.get(pk=backend)).cancel(handle, grace=0)
    ended = left.update(
        state="cancelled", finished_at=timezone.now(), message="left by an earlier benchmark"
    )
    Study.objects.exclude(state__in=(*ENDED_STUDY_STATES, StudyState.DRAFT)).update(
        state=StudyState.CANCELLED
    )
    if ended:
        progress(f"{ended} run(s) an earlier benchmark left unfinished: cancelled")


def fresh_stack():
    """The portal's processes on the bench database, with no stale tasks queued from earlier runs."""
    import redis
    from django.conf import settings

    from core.stack import Stack

    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    return Stack()


def noop_study(*, name: str, parameters: dict, submit: bool = True):
    """A fresh tenant with room to spare and a submitted study on the no-op backend (nothing
    runs: the benchmark drives the runs' reports itself)."""
    from catalog.models import Backend
    from quotas.services import tenant_provision
    from studies.models import Run
    from studies.services import study_create

    Backend.objects.update_or_create(
        name="noop", defaults={"kind": "noop", "cores": 10_000, "memory_gb": 1e6, "max_nodes": 1}
    )
    tenant = tenant_provision(
        name=f"bench-{name}",
        username=f"bench-{name}",
        quota={"cores": 10_000, "memory_gb": 1e6, "max_runs": 10_000, "max_queued_runs": 10_000},
    )
    Run.objects.filter(tenant=tenant).delete()
    spec = {
        "name": name,
        "template": "cavity",
        "backend": "noop",
        "parameters": parameters,
        "reuse": False,
    }
    return study_create(
        tenant=tenant, owner=tenant.memberships.get().user, spec=spec, submit=submit
    )


def started_runs(study, *, state: str = "running") -> dict[str, str]:
    """Give every run of a no-op study its attempt 1 and that attempt's token, as dispatch
    would, in `state`; return run id → token (what each run's agent would hold)."""
    from django.utils import timezone

    from studies.models import Run
    from studies.transitions import hash_run_token, run_token

    tokens = {}
    now = timezone.now()
    for run_id in Run.objects.filter(study=study).values_list("pk", flat=True):
        token = tokens[str(run_id)] = run_token(run_id=run_id, attempt=1)
        Run.objects.filter(pk=run_id).update(
            state=state,
            attempt=1,
            token_hash=hash_run_token(token),
            heartbeat_at=now,
            started_at=now if state == "running" else None,
        )
    return tokens


def emit(name: str, value: float, unit: str, context: str, **extra: Any) -> None:
    """Print the one final BENCH line, write bench/results/<name>.json with the raw samples,
    and, for a full-size run, keep the figure as its latest result in bench/results.json (the
    table of docs/benchmarks.md). Its target comes from bench/figures.py."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    if name not in FIGURES and not SMOKE:
        progress(f"{name} is not in bench/figures.py: recorded without a target or command")
    measured = record.entry(name=name, value=value, unit=unit, context=context)
    details = {"name": name, **measured, **extra}
    if SMOKE:  # a smoke run measures nothing: it never replaces a real result
        details["context"] = context = f"{context} (smoke)"
        (RESULTS / "smoke").mkdir(exist_ok=True)
        (RESULTS / "smoke" / f"{name}.json").write_text(json.dumps(details, indent=2, default=str))
    else:
        (RESULTS / f"{name}.json").write_text(json.dumps(details, indent=2, default=str))
        record.record(name, measured)
    line = f"BENCH {name} {value:.4g} {unit} {context}{verdict_of(name, value)}"
    print(line, flush=True)
    failure = guard_failure(name, value, unit)
    if failure is not None:
        GUARD_FAILURES.append(failure)


# the figures of this process that missed their targets by more than their noise margins
# (bench/run.py fails the benchmark with them once it has printed all its figures)
GUARD_FAILURES: list[str] = []


def verdict_of(name: str, value: float) -> str:
    """The BENCH line's verdict: ` [meets ≤ 1.03]`, ` [MISSES ≤ 1.03]` (beyond the noise
    margin it is judged with), ` [misses ≤ 1.03, within its noise margin 0.04]`, or
    ` [no target]`."""
    figure = FIGURES.get(name)
    if figure is None or figure.target is None:
        return " [no target]"
    target = figure.target
    if target.met_by(value):
        return f" [meets {target}]"
    margin = figure.margin(smoke=SMOKE)
    if margin is None:
        return f" [MISSES {target}; reported, not failed, at smoke size]"
    if not target.missed_beyond(value, margin):
        return f" [misses {target}, within its noise margin {margin:g}]"
    return f" [MISSES {target}]"


def guard_failure(name: str, value: float, unit: str) -> str | None:
    """The line naming a figure that missed its target by more than the margin it is judged
    with at this size (bench/figures.py), or None."""
    figure = FIGURES.get(name)
    margin = figure.margin(smoke=SMOKE) if figure else None
    if figure is None or figure.target is None or margin is None:
        return None
    if not figure.target.missed_beyond(value, margin):
        return None
    size = "smoke size" if SMOKE else "full size"
    return (
        f"{name} = {value:.4g} {unit} misses its target {figure.target} {unit} by more than "
        f"its noise margin {margin:g} at {size} (fails past {figure.target.limit(margin):g})"
    )


def machine_cpu() -> tuple[float, float]:
    """(busy, steal): CPU-seconds the whole machine has been busy (user, nice, system, irq,
    softirq) and lost to the host (steal) since boot, from /proc/stat. Deltas around a run say
    how much work it took, which the host's speed barely moves, unlike its wall time."""
    fields = [int(v) for v in open("/proc/stat").readline().split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq) / tick, steal / tick


class CpuMeter:
    """Machine CPU used between start() and stop(): busy and steal CPU-seconds."""

    def start(self) -> None:
        self.busy0, self.steal0 = machine_cpu()

    def stop(self) -> tuple[float, float]:
        busy, steal = machine_cpu()
        return busy - self.busy0, steal - self.steal0


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)
