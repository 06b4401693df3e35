"""OpenStack backend benchmarks against the loopback control plane (started here, with a lease).

openstack_active_latency_s: admission → server ACTIVE for 20 runs through the portal (stack,
scheduler, Celery dispatch, the driver, Nova with the fake compute driver), one run in flight
at a time vs five. Fake servers never boot, so each run is cancelled once its server is ACTIVE
(which frees its quota for the next one).

openstack_leaked_servers: 100 create/delete cycles through the driver while nova-api is
frozen (SIGSTOP) for 2 s every 10th cycle, with a 1 s API timeout: errors are expected; what
counts is the servers left behind after the portal's leak reaper has had one pass (target 0).
The count before that pass is printed too.
"""

from __future__ import annotations

import json
import random
import signal
import statistics
import sys
import threading
import time

import psutil

from bench.common import ROOT, emit, fresh_stack, progress, setup_django, sized, started

CLOUD_JSON = ROOT / ".data" / "openstack" / "cloud.json"
RUNS, CYCLES = sized(20, 2), sized(100, 3)


def _cloud() -> dict:
    return json.loads(CLOUD_JSON.read_text())


def _settings(**extra) -> dict:
    c = _cloud()
    return {
        "cloud": c["clouds"]["tenant"],
        "clouds_yaml": c["clouds_yaml"],
        "network": "none",
        "image": c["image"]["name"],
        "boot_timeout": 3600,
        "leak_grace": 0,
        **extra,
    }


def _freeze_nova(seconds: float, delay: float = 0.0) -> None:
    time.sleep(delay)
    pid = int((ROOT / ".data/openstack/run/nova-api.pid").read_text().split()[0])
    root = psutil.Process(pid)
    tree = [root, *root.children(recursive=True)]
    for p in tree:
        p.send_signal(signal.SIGSTOP)
    time.sleep(seconds)
    for p in tree:
        p.send_signal(signal.SIGCONT)


def active_latency(in_flight: int) -> list[float]:
    from catalog.models import Backend
    from quotas.services import tenant_provision
    from studies.models import Run
    from studies.services import study_create
    from studies.transitions import run_cancel

    backend, _ = Backend.objects.update_or_create(
        name="bench-openstack",
        defaults={
            "kind": "openstack",
            "settings": _settings(),
            "cores": 100,
            "memory_gb": 200,
            "max_nodes": 50,
            "enabled": True,
        },
    )
    tenant = tenant_provision(
        name=f"bench-os-{in_flight}",
        username=f"bench-os-{in_flight}",
        quota={"cores": in_flight, "memory_gb": 100, "max_runs": in_flight, "max_nodes": 50},
    )
    Run.objects.filter(tenant=tenant).delete()
    user = tenant.memberships.get().user
    from catalog.choices import ImageKind, ImageStatus
    from catalog.images import image_compose
    from catalog.models import Image

    image, _ = image_compose(packages=["icofoam", "meshing"], kind=ImageKind.VM, build=False)
    Image.objects.filter(pk=image.pk).update(
        status=ImageStatus.READY,
        references={**image.references, backend.name: _cloud()["image"]["id"]},
    )
    study = study_create(
        tenant=tenant,
        owner=user,
        spec={
            "name": f"active latency x{in_flight}",
            "template": "cavity",
            "reuse": False,  # measured runs are computed, never reused
            "backend": backend.name,
            "image": image.digest,
            "parameters": {"lid_velocity": {"linspace": [1, 2, RUNS]}, "cells": 10},
        },
        submit=True,
    )
    from orchestration.drivers.base import build_driver

    conn = build_driver("openstack", backend.settings).conn
    latencies: dict[str, float] = {}
    deadline = time.monotonic() + 600
    while len(latencies) < RUNS and time.monotonic() < deadline:
        for run in Run.objects.filter(study=study).exclude(handle="").exclude(id__in=[*latencies]):
            server = conn.compute.get_server(run.handle.partition(":")[2])
            if server.status == "ACTIVE":
                latencies[str(run.id)] = time.time() - run.admitted_at.timestamp()
                run_cancel(run=run, by=user)  # frees its place: the next run is admitted
        time.sleep(0.05)
    progress(f"{len(latencies)} of {RUNS} servers ACTIVE with {in_flight} in flight")
    return list(latencies.values())


def leaked_servers() -> tuple[int, int, int]:
    from catalog.models import Backend
    from dispatch.leaks import leaks_reap
    from orchestration.drivers.base import DriverError, RunSpec, Step, build_driver

    settings = _settings(api_timeout=1)
    Backend.objects.update_or_create(
        name="bench-openstack",
        defaults={
            "kind": "openstack",
            "settings": settings,
            "cores": 100,
            "memory_gb": 200,
            "max_nodes": 50,
            "enabled": True,
        },
    )
    driver = build_driver("openstack", settings)
    errors = 0
    retries = 0
    real_sleep = driver.sleep

    def counting_sleep(seconds: float) -> None:  # every retry is a failed API call absorbed
        nonlocal retries
        retries += 1
        real_sleep(seconds)

    driver.sleep = counting_sleep
    rng = random.Random(7)
    for i in range(CYCLES):
        spec = RunSpec(
            run_id=f"00000000-0000-4000-8000-{i:012d}",
            attempt=1,
            portal_url="http://127.0.0.1:9",
            token="x",
            case_dir="/x",
            work_dir="/x",
            context={},
            steps=[Step(name="s", argv=("true",))],
            processes=1,
            memory_gb=1,
        )
        freezer = None
        if i % 10 == 5:  # frozen somewhere in the create (lookups, or the create call itself)
            freezer = threading.Thread(target=_freeze_nova, args=(2.0, rng.uniform(0, 0.4)))
            freezer.start()
        handle = None
        try:
            handle = driver.start(spec)
        except DriverError:
            errors += 1
        if i % 10 == 7:  # frozen during the delete
            freezer = threading.Thread(target=_freeze_nova, args=(2.0, rng.uniform(0, 0.1)))
            freezer.start()
        try:
            if handle:
                driver.release(handle)
        except DriverError:
            errors += 1
        if freezer:
            freezer.join()
    time.sleep(2)

    def ours() -> int:
        return sum(
            1
            for s in driver.portal_servers()
            if str(s.metadata.get("windtunnel_run", "")).startswith("00000000-0000-4000-8000-")
        )

    before = ours()
    leaks_reap()  # the portal's reaper: nothing of these runs is tracked
    deadline = time.monotonic() + 60
    while ours() and time.monotonic() < deadline:
        time.sleep(1)
    return before, ours(), errors, retries


def main() -> None:
    with started("openstack"):  # the loopback control plane, for this benchmark's length
        _main()


def _main() -> None:
    setup_django()
    stack = fresh_stack()
    stack.start_web()
    stack.start_worker()
    try:
        seq = active_latency(1)
        conc = active_latency(5)
    finally:
        stack.stop()
    if len(seq) < RUNS or len(conc) < RUNS:
        raise SystemExit("not every server went ACTIVE")
    p50s, p50c = statistics.median(seq), statistics.median(conc)
    progress(f"admission→ACTIVE: 1 in flight p50 {p50s:.2f} s, 5 in flight p50 {p50c:.2f} s")
    emit(
        "openstack_active_latency_s",
        p50c,
        "s",
        f"admission→ACTIVE p50,{RUNS} runs,5 in flight vs 1 in flight {p50s:.2f} s,ratio {p50c / p50s:.2f}",
        sequential_p50_s=p50s,
        concurrent_p50_s=p50c,
        sequential_s=sorted(seq),
        concurrent_s=sorted(conc),
    )
    before, after, errors, retries = leaked_servers()
    progress(
        f"{CYCLES} cycles: {retries} failed API calls retried, {errors} errors surfaced; "
        f"{before} servers left before the reaper pass, {after} after"
    )
    emit(
        "openstack_leaked_servers",
        after,
        "servers",
        f"after {CYCLES} create/delete cycles with nova-api frozen 2 s twice every 10 cycles,"
        f"{retries} calls retried,{errors} errors surfaced,{before} before the reaper pass",
        before_reaper=before,
        api_errors=errors,
        api_retries=retries,
    )


if __name__ == "__main__":
    sys.exit(main())
