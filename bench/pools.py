"""Warm pools on the loopback OpenStack (docs/pools.md), with an injected boot delay.

A 16-run cavity study (real icoFoam, cells 10, end time 0.1) on the loopback cloud, the
tenant allowed 4 runs at a time, twice in the same run:

- baseline: a server per run (the OpenStack driver as before);
- pool: a warm pool from zero (min 0, max 4 wt.small workers, one run each).

Fake servers never boot, so a player thread here plays each server (runs its user data) only
BOOT_DELAY seconds after it appeared (20 s; 3 s in smoke mode): what a real boot costs.

pool_makespan_ratio: study makespan (submit → last run ended) with the pool ÷ with a server
per run (target ≤ 0.5). pool_idle_worker_s_ratio: worker-seconds the pool's workers stayed up
after the study's last run ended ÷ (idle timeout × workers) (target ≤ 1.2: the pool gives
idle workers back on time, not later).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.common import ROOT, emit, fresh_stack, progress, setup_django, sized, started

# WT_OPENSTACK_DIR: a control plane of this benchmark's own (start-openstack honours it too)
CLOUD_JSON = Path(os.environ.get("WT_OPENSTACK_DIR") or ROOT / ".data" / "openstack") / "cloud.json"
RUNS = sized(16, 8)
IN_FLIGHT = 4
BOOT_DELAY = float(os.environ.get("WT_BENCH_BOOT_DELAY", sized(20, 3)))
IDLE_TIMEOUT = float(sized(30, 10))

# the stack started below reads these
os.environ.setdefault("WINDTUNNEL_POOL_AUTOSCALE_SECONDS", "1")


def _cloud() -> dict:
    return json.loads(CLOUD_JSON.read_text())


def _admin():
    import openstack

    c = _cloud()
    return openstack.connection.Connection(
        auth=c["admin"], region_name=c["region"], compute_api_version="2.79"
    )


class Player(threading.Thread):
    """Plays every server of the bench (its user data, on this machine) BOOT_DELAY s after it
    first appeared: the boot a fake server skips."""

    def __init__(self, delay: float) -> None:
        super().__init__(daemon=True)
        self.delay = delay
        self.seen: dict[str, float] = {}
        self.played: dict[str, subprocess.Popen] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        conn = _admin()
        env = {
            "PATH": os.environ["PATH"],
            "PYTHONPATH": str(ROOT),
            "WM_PROJECT_DIR": "/usr/share/openfoam",
            "HOME": os.environ.get("HOME", "/root"),
        }
        while not self.stop.is_set():
            try:
                self.play_due(conn, env)
            except Exception as exc:  # a cloud API hiccup: the next pass tries again
                progress(f"player: {exc}")
            time.sleep(0.25)

    def play_due(self, conn, env: dict) -> None:
        now = time.monotonic()
        for server in conn.compute.servers(all_projects=True, name="^wt-"):
            if str(server.metadata.get("windtunnel_kind")) not in ("run", "pool"):
                continue
            self.seen.setdefault(server.id, now)
            if server.id in self.played or server.status != "ACTIVE":
                continue
            if now - self.seen[server.id] < self.delay:
                continue
            data = base64.b64decode(conn.compute.get_server(server.id).user_data).decode()
            self.played[server.id] = subprocess.Popen(
                ["sh", "-c", data], env=env, start_new_session=True
            )

    def finish(self) -> None:
        self.stop.set()
        self.join(timeout=10)
        for proc in self.played.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, 9)
                except ProcessLookupError:
                    pass


def _backend(name: str, work: Path):
    from catalog.models import Backend

    c = _cloud()
    backend, _ = Backend.objects.update_or_create(
        name=name,
        defaults={
            "kind": "openstack",
            "settings": {
                "cloud": c["clouds"]["tenant"],
                "clouds_yaml": c["clouds_yaml"],
                "network": "none",
                "boot_timeout": 3600,
                "leak_grace": 3600,
                "vm_work_root": str(work),
                "vm_python": sys.executable,
            },
            "cores": 100,
            "memory_gb": 200,
            "max_nodes": 4,
            "enabled": True,
        },
    )
    return backend


def _image(backend):
    from catalog.choices import ImageKind, ImageStatus
    from catalog.images import image_compose
    from catalog.models import Image

    image, _ = image_compose(packages=["icofoam", "meshing"], kind=ImageKind.VM, build=False)
    refs = {**(image.references or {}), backend.name: _cloud()["image"]["id"]}
    Image.objects.filter(pk=image.pk).update(status=ImageStatus.READY, references=refs)
    image.refresh_from_db()
    return image


def study_makespan(mode: str, work: Path) -> dict:
    """One 16-run study; its makespan, and with the pool the idle worker-seconds after it."""
    from django.utils import timezone

    from pools.models import Pool, PoolWorker
    from quotas.services import tenant_provision
    from studies.choices import TERMINAL_STATES
    from studies.models import Run
    from studies.services import study_create

    backend = _backend(f"bench-pools-{mode}", work / mode)
    image = _image(backend)
    Pool.objects.filter(name="bench-pool").delete()
    if mode == "pool":
        Pool.objects.create(
            backend=backend,
            name="bench-pool",
            flavor="wt.small",
            image=image,
            cores=1,
            memory_gb=1.0,
            min_workers=0,
            max_workers=IN_FLIGHT,
            idle_timeout=IDLE_TIMEOUT,
            boot_timeout=BOOT_DELAY + 300,
        )
    tenant = tenant_provision(
        name=f"bench-pools-{mode}",
        username=f"bench-pools-{mode}",
        quota={"cores": IN_FLIGHT, "memory_gb": 100, "max_runs": IN_FLIGHT, "max_nodes": 4},
    )
    Run.objects.filter(tenant=tenant).delete()
    player = Player(BOOT_DELAY)
    player.start()
    try:
        start = timezone.now()
        study = study_create(
            tenant=tenant,
            owner=tenant.memberships.get().user,
            spec={
                "name": f"pools bench {mode}",
                "template": "cavity",
                "reuse": False,  # measured runs are computed, never reused
                "backend": backend.name,
                "image": image.digest,
                "parameters": {
                    "lid_velocity": {"linspace": [1, 2, RUNS]},
                    "cells": 10,
                    "end_time": 0.1,
                },
            },
            submit=True,
        )
        deadline = time.monotonic() + 1800
        while time.monotonic() < deadline:
            states = list(Run.objects.filter(study=study).values_list("state", flat=True))
            if all(s in TERMINAL_STATES for s in states):
                break
            time.sleep(0.5)
        runs = list(Run.objects.filter(study=study))
        done = [r for r in runs if r.state == "completed"]
        if len(done) < RUNS:
            raise SystemExit(
                f"{mode}: {len(done)} of {RUNS} runs completed: {[r.message for r in runs if r.state != 'completed'][:3]}"
            )
        retried = sum(r.attempt > 1 for r in runs)
        if retried:  # a lost server (another session's cleanup, a cloud restart) skews the figure
            raise SystemExit(
                f"{mode}: {retried} run(s) needed a second attempt: not a fair measurement"
            )
        last = max(r.finished_at for r in runs)
        makespan = (last - start).total_seconds()
        progress(f"{mode}: {RUNS} runs in {makespan:.1f} s ({len(player.played)} servers played)")
        out = {"makespan_s": makespan, "servers": len(player.played)}
        if mode == "pool":
            limit = time.monotonic() + IDLE_TIMEOUT * 4 + 60
            while (
                time.monotonic() < limit
                and PoolWorker.objects.filter(
                    pool__name="bench-pool", state__in=["booting", "idle", "busy", "draining"]
                ).exists()
            ):
                time.sleep(0.5)
            workers = list(PoolWorker.objects.filter(pool__name="bench-pool"))
            idle = [
                max(0.0, ((w.ended_at or timezone.now()) - last).total_seconds())
                for w in workers
                if w.registered_at is not None
            ]
            out.update(
                workers=len(idle),
                idle_after_last_s=idle,
                idle_ratio=sum(idle) / (IDLE_TIMEOUT * max(len(idle), 1)),
            )
        return out
    finally:
        player.finish()
        conn = _admin()
        for server in conn.compute.servers(all_projects=True, name="^wt-"):
            if server.metadata.get("windtunnel_kind") in ("run", "pool"):
                conn.compute.delete_server(server.id, ignore_missing=True)
        Pool.objects.filter(name="bench-pool").delete()


def main() -> None:
    if os.environ.get("WT_OPENSTACK_RUNNING") and CLOUD_JSON.is_file():
        _main()  # a control plane another session started and leases (the caller holds one)
        return
    with started("openstack"):  # the loopback control plane, for this benchmark's length
        _main()


def _main() -> None:
    setup_django()
    work = Path(tempfile.mkdtemp(prefix="bench-pools-"))
    stack = fresh_stack()
    stack.start_web()
    stack.start_worker()
    try:
        baseline = study_makespan("per-run", work)
        pool = study_makespan("pool", work)
    finally:
        stack.stop()
        shutil.rmtree(work, ignore_errors=True)
    ratio = pool["makespan_s"] / baseline["makespan_s"]
    context = (
        f"{RUNS} cavity runs,{IN_FLIGHT} at a time,boot delay {BOOT_DELAY:g} s,"
        f"pool from zero {pool['makespan_s']:.1f} s vs a server per run {baseline['makespan_s']:.1f} s"
    )
    emit(
        "pool_idle_worker_s_ratio",
        pool["idle_ratio"],
        "x",
        f"idle worker-s after the last run ÷ (idle timeout {IDLE_TIMEOUT:g} s × {pool['workers']} workers),target ≤ 1.2",
        idle_after_last_s=pool["idle_after_last_s"],
    )
    emit(
        "pool_makespan_ratio",
        ratio,
        "x",
        f"{context},target ≤ 0.5",
        pool=pool,
        baseline=baseline,
    )


if __name__ == "__main__":
    sys.exit(main())
