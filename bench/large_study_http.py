"""large_study_http_*: a 100,000-run study on a running portal, driven over HTTP with an API
token: the web process, a Celery worker with beat (as `make run` starts them) on the bench's
PostgreSQL and Redis, the runs on the no-op backend.

- `large_study_http_submit_s`: create + submit in one `POST`, while the worker starts
  admitting and dispatching the first runs;
- `large_study_http_cancel_s`: the `POST` cancel, answered while the worker dispatches (its
  queued runs are then ended in the background);
- `large_study_http_delete_s`: the `DELETE`, answered with the study hidden (its rows and
  files are removed in the background; the deletion's progress is read meanwhile);
- `large_study_http_page_ms`: the pages a user opens while that background work runs — the
  study's page (detail and its first runs page) during the cancel's half, the runs page and
  another study's page during the deletion — the worst of their medians.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx

from bench.common import emit, fresh_stack, progress, setup_django, sized

RUNS = sized(100_000, 2_000)
READS = 5  # reads of each page per background phase (its median is the page's figure)


def timed(client: httpx.Client, method: str, path: str, **kwargs: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    r = client.request(method, path, **kwargs)
    elapsed = time.perf_counter() - t0
    if r.status_code >= 400:
        raise SystemExit(f"{method} {path}: {r.status_code} {r.text[:500]}")
    return elapsed, r


def read_pages(
    client: httpx.Client, pages: dict[str, str], *, until: Callable[[], bool]
) -> dict[str, list[float]]:
    """Each page read READS times, in turn, while `until()` is false (at least once each):
    the milliseconds of each read."""
    samples: dict[str, list[float]] = {name: [] for name in pages}
    while True:
        for name, path in pages.items():
            samples[name].append(1000 * timed(client, "GET", path)[0])
        if len(next(iter(samples.values()))) >= READS or until():
            return samples


def medians(samples: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    os.environ.setdefault("WINDTUNNEL_MAX_RUNS_PER_STUDY", str(RUNS))
    # noop runs never report: keep the reaper from requeueing them while we measure
    os.environ["WINDTUNNEL_HEARTBEAT_TIMEOUT"] = os.environ["WINDTUNNEL_DISPATCH_TIMEOUT"] = "3600"
    setup_django()
    from catalog.models import Backend
    from quotas.services import tenant_provision
    from studies.models import Run, Study
    from tenancy.services import api_token_create

    Backend.objects.update_or_create(
        name="noop", defaults={"kind": "noop", "cores": 10_000, "memory_gb": 1e6, "max_nodes": 1}
    )
    tenant = tenant_provision(
        name="bench-large-http",
        username="bench-large-http",
        quota={"cores": 64, "memory_gb": 1e4, "max_runs": 64, "max_queued_runs": 2 * RUNS},
    )
    Run.objects.filter(tenant=tenant).delete()
    Study.objects.filter(tenant=tenant).delete()
    token = api_token_create(user=tenant.memberships.get().user)

    stack = fresh_stack()
    stack.start_web()
    stack.start_worker(wait=True)  # with beat: the portal as `make run` runs it, up a while
    out: dict[str, Any] = {}
    try:
        with httpx.Client(
            base_url=stack.url, headers={"Authorization": f"Token {token}"}, timeout=600
        ) as client:
            out = measure(client)
    finally:
        stack.stop()
        Run.objects.filter(tenant=tenant).delete()
        Study.objects.filter(tenant=tenant).delete()
    report(out)


def spec(name: str, runs: int) -> dict[str, Any]:
    return {
        "name": name,
        "template": "cavity",
        "backend": "noop",
        "reuse": False,
        "parameters": {"lid_velocity": {"linspace": [0.1, 10, runs]}},
    }


def measure(client: httpx.Client) -> dict[str, Any]:
    out: dict[str, Any] = {}
    other = timed(client, "POST", "/api/v1/studies/", json={**spec("beside it", 10), "draft": True})
    other_id = other[1].json()["id"]
    progress(f"{RUNS:,} runs: create + submit")
    out["submit_s"], r = timed(client, "POST", "/api/v1/studies/", json=spec("large", RUNS))
    sid = r.json()["id"]
    assert r.json()["run_count"] == RUNS, r.json()["run_count"]
    time.sleep(1)  # the worker admits and dispatches the first runs meanwhile
    progress(f"{RUNS:,} runs: cancel")
    out["cancel_s"], r = timed(client, "POST", f"/api/v1/studies/{sid}/cancel/")
    assert r.json()["state"] == "cancelled", r.json()["state"]
    out["cancelling_shown"] = r.json()["progress"]["cancelling"]

    def cancelled() -> bool:
        detail = client.get(f"/api/v1/studies/{sid}/").json()
        return detail["progress"]["cancelling"] == 0

    t0 = time.perf_counter()
    out["during_cancel"] = read_pages(
        client,
        {
            "study": f"/api/v1/studies/{sid}/",
            "study_runs": f"/api/v1/studies/{sid}/runs/?page_size=100",
            "runs": "/api/v1/runs/?page_size=50",
        },
        until=cancelled,
    )
    while not cancelled():
        time.sleep(0.2)
    out["cancel_background_s"] = time.perf_counter() - t0
    progress(f"{RUNS:,} runs: delete")
    out["delete_s"], r = timed(client, "DELETE", f"/api/v1/studies/{sid}/")
    assert r.status_code == 204, r.status_code
    hidden = client.get(f"/api/v1/studies/{sid}/").status_code
    assert hidden == 404, f"a deleted study answered {hidden}"
    t0 = time.perf_counter()
    shown: list[tuple[float, int]] = []

    def deleted() -> bool:
        deleting = client.get("/api/v1/studies/deletions/").json()
        if deleting:
            shown.append((round(time.perf_counter() - t0, 2), deleting[0]["runs_deleted"]))
        return not deleting

    out["during_delete"] = read_pages(
        client,
        {
            "runs": "/api/v1/runs/?page_size=50",
            "studies": "/api/v1/studies/?page_size=8",
            "other_study": f"/api/v1/studies/{other_id}/",
            "deletions": "/api/v1/studies/deletions/",
        },
        until=deleted,
    )
    while not deleted():
        time.sleep(0.2)
    out["delete_background_s"] = time.perf_counter() - t0
    out["delete_progress"] = shown
    return out


def report(out: dict[str, Any]) -> None:
    pages = {
        **{f"{k} (cancelling)": v for k, v in medians(out["during_cancel"]).items()},
        **{f"{k} (deleting)": v for k, v in medians(out["during_delete"]).items()},
    }
    worst = max(pages, key=lambda k: pages[k])
    big = f"{RUNS:,} runs"
    raw = {"runs": RUNS, **out}
    emit(
        "large_study_http_submit_s",
        out["submit_s"],
        "s",
        f"{big} created + submitted (one POST) on a running portal (web, worker, beat)",
        **raw,
    )
    emit(
        "large_study_http_cancel_s",
        out["cancel_s"],
        "s",
        f"{big}, one POST cancel while the worker dispatched (its answer showed "
        f"{out['cancelling_shown']:,} cancelling; their background end "
        f"{out['cancel_background_s']:.1f} s)",
        **raw,
    )
    progress_seen = ", ".join(f"{n:,} at {t:g} s" for t, n in out["delete_progress"][:6])
    emit(
        "large_study_http_delete_s",
        out["delete_s"],
        "s",
        f"{big}, one DELETE (404 at once); rows and files removed in the background in "
        f"{out['delete_background_s']:.1f} s (progress shown: {progress_seen or 'none'})",
        **raw,
    )
    emit(
        "large_study_http_page_ms",
        pages[worst],
        "ms",
        f"worst median of {READS} reads while the background work ran: {worst}; "
        + ", ".join(f"{k} {v:.0f}" for k, v in pages.items()),
        pages_ms=pages,
        **raw,
    )


if __name__ == "__main__":
    main()
