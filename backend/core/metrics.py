"""What the portal's processes count for operators (Prometheus, docs/metrics.md).

The portal is several processes: uvicorn's workers (web) and the Celery worker with its beat.
The instruments below are observed where things happen (admission in the worker, websocket
clients in the web, telemetry in both) and served by the web's `/metrics`
(`administration.metrics`). They cross processes through prometheus-client's multiprocess
mode: each process writes its values into memory-mapped files of its own under
`WINDTUNNEL["METRICS_DIR"]`, and a scrape adds them up. Counters and histograms of a process
that ended stay in its files (a sum never goes down, which Prometheus would read as a reset);
live gauges (websocket clients) are removed with their process.

Files are named by host and pid (`process_id`), not by pid alone: in docker/compose.yaml the
web and worker containers share the data volume, and both may be pid 7 of their own namespace.

New instruments go here, named `windtunnel_<what>_<unit>`; values read from the database at
scrape time are collectors in `administration.metrics` instead.
"""

from __future__ import annotations

import atexit
import glob
import os
import socket
from pathlib import Path

import psutil
from django.conf import settings
from prometheus_client import Counter, Gauge, Histogram, values
from prometheus_client.multiprocess import mark_process_dead

METRICS_DIR = Path(settings.WINDTUNNEL["METRICS_DIR"])
# '_' separates the parts of prometheus-client's file names: none in ours
HOST = socket.gethostname().replace("_", "-")


def process_id() -> str:
    """This process's name in the metrics files: host and pid (see the module's doc)."""
    return f"{HOST}-{os.getpid()}"


METRICS_DIR.mkdir(parents=True, exist_ok=True)
# before the first instrument: every value of this process is kept in METRICS_DIR's files
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(METRICS_DIR)
values.ValueClass = values.MultiProcessValue(process_identifier=process_id)

# --- scheduler and dispatch (the Celery worker) -------------------------------------------
ADMISSION_DURATION = Histogram(
    "windtunnel_admission_duration_seconds",
    "Time one admission pass for one tenant took (scheduler.admission.admit)",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
    registry=None,
)
RUNS_ADMITTED = Counter(
    "windtunnel_runs_admitted", "Runs admission let through (pending → admitted)", registry=None
)
DISPATCH_LATENCY = Histogram(
    "windtunnel_dispatch_latency_seconds",
    "From a run's admission to its start on its backend (the backend took it)",
    ["backend"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0),
    registry=None,
)
DISPATCH_FAILURES = Counter(
    "windtunnel_dispatch_failures",
    "Starts a backend refused or could not take (the run is retried or failed)",
    ["backend"],
    registry=None,
)

POOL_DECISIONS = Counter(
    "windtunnel_pool_decisions",
    "Warm pools: the autoscaler's decisions (up, down, hold, lost, boot_failed, drain)",
    ["pool", "action"],
    registry=None,
)

# --- ingest (the web) -----------------------------------------------------------------------
INGEST_POINTS = Counter(
    "windtunnel_ingest_points", "Telemetry points stored (all series of all runs)", registry=None
)
INGEST_BATCHES = Counter(
    "windtunnel_ingest_batches", "Telemetry batches stored (agents' reports)", registry=None
)

# --- live streams (the web) -----------------------------------------------------------------
WEBSOCKET_CLIENTS = Gauge(
    "windtunnel_websocket_clients",
    "Websocket clients subscribed to a live stream, by stream kind (run, study)",
    ["stream"],
    multiprocess_mode="livesum",
    registry=None,
)


_exit_hook: list[object] = []  # registered with atexit once per process


def metrics_process_start() -> None:
    """At a process's start: its live gauges start from nothing (a restarted container
    comes back with the same host name and often the same pid), the live gauges of processes
    of this host that died without cleaning up (SIGKILL) go, and this process's own go when
    it exits. Call it before the process's first observation; calling it again is harmless."""
    METRICS_DIR.mkdir(parents=True, exist_ok=True)
    metrics_prune_dead()
    mark_process_dead(process_id(), str(METRICS_DIR))
    if not _exit_hook:
        atexit.register(metrics_process_end)
        _exit_hook.append(metrics_process_end)


def metrics_process_end() -> None:
    """This process's live gauges leave the sums (at exit; a forked child names itself)."""
    mark_process_dead(process_id(), str(METRICS_DIR))


def metrics_prune_dead() -> None:
    """Remove the live-gauge files of this host's processes that are gone. Other hosts'
    files are theirs to clean (metrics_process_start there)."""
    pattern = f"gauge_live*_{glob.escape(HOST)}-*.db"
    for path in METRICS_DIR.glob(pattern):
        pid = path.stem.rsplit("-", 1)[-1]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            path.unlink(missing_ok=True)
