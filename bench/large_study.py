"""large_study_*: a study of 100,000 runs (and one of 10,000, for the scaling) through the real
API on the no-op backend: create + submit, the pages a user opens, results.csv streamed,
cancel of every run while all are queued, and the web process's memory meanwhile.

Nothing admits the runs (no worker runs: the scheduling jobs the API enqueues wait in the
bench's own queue), so all of them are queued when the study is cancelled: the worst case of
cancelling a 100,000-run study. Each figure is a time measured in this run; the
scaling (time at 100k ÷ time at 10k, worst of the figures) is the one that survives the
machine's weather. A figure that misses its target is printed as one, never an error.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import httpx
import psutil

from bench.common import emit, fresh_stack, progress, setup_django, sized
from bench.figures import threshold

SIZES = [sized(10_000, 200), sized(100_000, 2_000)]
TARGETS = {
    "submit_s": threshold("large_study_submit_s"),
    "cancel_s": threshold("large_study_cancel_s"),
    "csv_s": threshold("large_study_csv_s"),
    "csv_first_byte_s": 0.3,
}
PAGE_TARGET_MS = threshold("large_study_page_ms")
SCALING_TARGET = threshold("large_study_scaling")
RSS_TARGET_MB = threshold("large_study_rss_mb")


class RssSampler(threading.Thread):
    """The peak resident memory of one process tree, sampled every 0.2 s."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.peak = 0.0
        self.halt = threading.Event()

    def sample(self) -> float:
        total = 0
        for p in [self.proc, *self.proc.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total / 1024**2

    def run(self) -> None:
        while not self.halt.is_set():
            self.peak = max(self.peak, self.sample())
            self.halt.wait(0.2)


def timed(client: httpx.Client, method: str, path: str, **kwargs: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    r = client.request(method, path, **kwargs)
    elapsed = time.perf_counter() - t0
    if r.status_code >= 400:
        raise SystemExit(f"{method} {path}: {r.status_code} {r.text[:500]}")
    return elapsed, r


def best_ms(client: httpx.Client, path: str, repeat: int = 3) -> float:
    """The fastest of a few reads (the first pays for cold caches as much as for the work)."""
    return 1000 * min(timed(client, "GET", path)[0] for _ in range(repeat))


def streamed(client: httpx.Client, path: str) -> tuple[float, float, int]:
    """(first byte s, total s, bytes) of a download read as it comes."""
    t0 = time.perf_counter()
    first = None
    size = 0
    with client.stream("GET", path) as r:
        if r.status_code >= 400:
            raise SystemExit(f"GET {path}: {r.status_code}")
        for chunk in r.iter_raw():
            if first is None and chunk:
                first = time.perf_counter() - t0
            size += len(chunk)
    return first or 0.0, time.perf_counter() - t0, size


def measure(client: httpx.Client, runs: int) -> dict[str, float]:
    spec = {
        "name": f"large study {runs}",
        "template": "cavity",
        "backend": "noop",
        "parameters": {"lid_velocity": {"linspace": [0.1, 10, runs]}},
    }
    out: dict[str, float] = {}
    progress(f"{runs} runs: create + submit")
    out["submit_s"], r = timed(client, "POST", "/api/v1/studies/", json=spec)
    study = r.json()
    assert study["run_count"] == runs, study["run_count"]
    sid = study["id"]
    progress(f"{runs} runs: pages")
    out["detail_ms"] = best_ms(client, f"/api/v1/studies/{sid}/")
    out["runs_page_ms"] = best_ms(client, f"/api/v1/studies/{sid}/runs/?page_size=100")
    out["runs_last_page_ms"] = best_ms(
        client, f"/api/v1/studies/{sid}/runs/?page_size=100&page={runs // 100}"
    )
    # the dashboard's three requests go out together: the page waits for the slowest
    out["dashboard_studies_ms"] = best_ms(client, "/api/v1/studies/?page_size=8")
    out["dashboard_runs_ms"] = best_ms(
        client,
        "/api/v1/runs/?state=pending&state=admitted&state=provisioning&state=running&page_size=50",
    )
    out["dashboard_quota_ms"] = best_ms(client, "/api/v1/quota/")
    out["dashboard_ms"] = max(
        out["dashboard_studies_ms"], out["dashboard_runs_ms"], out["dashboard_quota_ms"]
    )
    progress(f"{runs} runs: results")
    out["csv_first_byte_s"], out["csv_s"], out["csv_bytes"] = streamed(
        client, f"/api/v1/studies/{sid}/results.csv"
    )
    out["json_first_byte_s"], out["json_s"], out["json_bytes"] = streamed(
        client, f"/api/v1/studies/{sid}/results/"
    )
    progress(f"{runs} runs: cancel")
    out["cancel_s"], r = timed(client, "POST", f"/api/v1/studies/{sid}/cancel/")
    out["cancelled_state_ok"] = float(r.json()["state"] == "cancelled")
    out["cancelling_shown"] = r.json()["progress"]["cancelling"]
    # the cancel's background half (the worker's job; no worker here, so it runs in this
    # process): the queued runs ended, a 5,000-index chunk per statement
    from studies.services import study_cancel_queued

    progress(f"{runs} runs: the cancel's background half")
    t0 = time.perf_counter()
    ended = study_cancel_queued(study_id=sid, who="bench")
    out["cancel_flip_s"] = time.perf_counter() - t0
    assert ended == runs, ended
    progress(f"{runs} runs: delete")
    out["delete_s"], r = timed(client, "DELETE", f"/api/v1/studies/{sid}/")
    assert r.status_code == 204, r.status_code
    out["page_ms"] = max(out["detail_ms"], out["runs_page_ms"], out["dashboard_ms"])
    progress(f"{runs} runs: {out}")
    return out


def verdict(value: float, target: float) -> str:
    return f"meets ≤ {target:g}" if value <= target else f"MISSES ≤ {target:g}"


def main() -> None:
    # the benchmark measures the product's limits, not the default cap on a study's size
    os.environ.setdefault("WINDTUNNEL_MAX_RUNS_PER_STUDY", str(max(SIZES)))
    setup_django()
    from catalog.models import Backend
    from quotas.services import tenant_provision
    from studies.models import Run, Study
    from tenancy.services import api_token_create

    Backend.objects.update_or_create(
        name="noop", defaults={"kind": "noop", "cores": 10_000, "memory_gb": 1e6, "max_nodes": 1}
    )
    tenant = tenant_provision(
        name="bench-large-study",
        username="bench-large-study",
        quota={
            "cores": 10_000,
            "memory_gb": 1e6,
            "max_runs": 10_000,
            "max_queued_runs": 2 * sum(SIZES),
        },
    )
    Run.objects.filter(tenant=tenant).delete()
    Study.objects.filter(tenant=tenant).delete()
    token = api_token_create(user=tenant.memberships.get().user)

    stack = fresh_stack()
    stack.start_web()  # no worker: nothing admits the runs, all stay queued
    assert stack.web is not None
    sampler = RssSampler(stack.web.pid)
    idle_mb = sampler.sample()
    sampler.start()
    results: dict[int, dict[str, float]] = {}
    try:
        with httpx.Client(
            base_url=stack.url, headers={"Authorization": f"Token {token}"}, timeout=1800
        ) as client:
            for n in SIZES:
                results[n] = measure(client, n)
    finally:
        sampler.halt.set()
        sampler.join()
        stack.stop()
        Run.objects.filter(tenant=tenant).delete()
        Study.objects.filter(tenant=tenant).delete()

    small, large = (results[n] for n in SIZES)
    big = f"{SIZES[1]:,} runs"
    scaled = {
        k: large[k] / small[k]
        for k in ("submit_s", "cancel_s", "csv_s", "detail_ms", "runs_page_ms", "dashboard_ms")
        if small[k] > 0
    }
    worst = max(scaled, key=lambda k: scaled[k])
    raw = {"sizes": SIZES, "results": {str(n): r for n, r in results.items()}}
    lines = [
        ("large_study_submit_s", large["submit_s"], "s", f"{big} created + submitted (POST)"),
        (
            "large_study_cancel_s",
            large["cancel_s"],
            "s",
            f"{big}, all queued, one POST cancel (its answer showed "
            f"{large['cancelling_shown']:,} cancelling); the worker's half "
            f"{large['cancel_flip_s']:.2f} s; the study deleted afterwards in "
            f"{large['delete_s']:.2f} s (one DELETE)",
        ),
        (
            "large_study_csv_s",
            large["csv_s"],
            "s",
            f"results.csv of {big} ({large['csv_bytes'] / 1e6:.1f} MB), first byte "
            f"{large['csv_first_byte_s']:.3f} s ({verdict(large['csv_first_byte_s'], 0.3)}); "
            f"JSON results {large['json_s']:.2f} s, first byte {large['json_first_byte_s']:.3f} s",
        ),
        (
            "large_study_page_ms",
            large["page_ms"],
            "ms",
            f"worst of study detail {large['detail_ms']:.0f}, runs page of 100 "
            f"{large['runs_page_ms']:.0f} (last page {large['runs_last_page_ms']:.0f}), "
            f"dashboard {large['dashboard_ms']:.0f} (studies {large['dashboard_studies_ms']:.0f}, "
            f"active runs {large['dashboard_runs_ms']:.0f}, quota {large['dashboard_quota_ms']:.0f})"
            f" ms at {big}",
        ),
    ]
    targets = {
        "large_study_submit_s": TARGETS["submit_s"],
        "large_study_cancel_s": TARGETS["cancel_s"],
        "large_study_csv_s": TARGETS["csv_s"],
        "large_study_page_ms": PAGE_TARGET_MS,
    }
    for name, value, unit, context in lines:
        progress(f"{name}: {verdict(value, targets[name])}")
        emit(
            name,
            value,
            unit,
            f"{context}; {verdict(value, targets[name])}",
            **raw,
        )
    rss_mb = sampler.peak
    progress(f"portal_rss_mb (web, during the study): {verdict(rss_mb, RSS_TARGET_MB)}")
    progress(
        f"study state after cancel: {'cancelled' if large['cancelled_state_ok'] else 'NOT cancelled'}"
    )
    emit(
        "large_study_rss_mb",
        rss_mb,
        "MB",
        f"web process peak during the {big} study (idle {idle_mb:.0f} MB); {verdict(rss_mb, RSS_TARGET_MB)}",
        **raw,
    )
    ratio = scaled[worst]
    progress(f"large_study_scaling: {verdict(ratio, SCALING_TARGET)}")
    emit(
        "large_study_scaling",
        ratio,
        "x",
        f"time at {SIZES[1]:,} ÷ at {SIZES[0]:,} runs, worst: {worst} "
        f"({', '.join(f'{k} {v:.1f}' for k, v in scaled.items())}); {verdict(ratio, SCALING_TARGET)}",
        scaled=scaled,
        **raw,
    )


if __name__ == "__main__":
    main()
