"""Process tuning shared by the web and worker processes, and the priority of background work."""

from __future__ import annotations

import contextlib
import gc
import ipaddress
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psutil
from django.db import connection


def tune_gc() -> None:
    """Keep Python's cyclic collector off the hot paths.

    A telemetry batch of 20,000 points allocates some 100,000 objects; with the default
    thresholds every batch set off full collections that walked all of Django's start-up
    objects (half the CPU of a batch). Freezing what start-up created moves it out of the
    collector's view, and a larger first threshold lets short-lived batches die young.
    A 20,000-point batch costs about half the CPU this way (34 ms instead of 69).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


T = TypeVar("T")
BACKGROUND_NICE = 19  # the scheduler's lowest priority: a page a user waits for goes first


def in_background(work: Callable[[], T]) -> T:
    """`work()` at the lowest CPU priority, and its database work too where it can be: the
    bulk half of a large study's cancel or delete (100,000 rows) keeps both cores busy for
    seconds, and the pages users open meanwhile should not wait behind it.

    It runs in a thread of its own (Linux schedules threads apart: a worker's other tasks
    keep their priority; the thread ends with the work, so nothing needs raising again) with
    a database connection of its own. That connection's server process is lowered as well
    when it is a PostgreSQL of this machine and this process may raise it back (root: a
    portal's own database, as `make run` starts it), and raised back before the connection is
    released (a pool keeps it for other work); elsewhere the database works at its usual
    priority. Returns what
    `work` returns; raises what it raises. Inside a transaction (a caller's, or a test's) it
    runs here at the usual priority: another connection would not see that transaction."""
    if connection.in_atomic_block:
        return work()
    outcome: dict[str, Any] = {}

    def thread() -> None:
        server, before = 0, 0
        try:
            _lower(threading.get_native_id())
            with connection.cursor() as cur:
                cur.execute("SELECT pg_backend_pid()")
                pid = cur.fetchone()[0]
            if os.geteuid() == 0 and _local_postgres(pid):
                with contextlib.suppress(OSError):
                    before = os.getpriority(os.PRIO_PROCESS, pid)
                    _lower(pid)
                    server = pid
            outcome["value"] = work()
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc
        finally:
            if server:
                with contextlib.suppress(OSError):  # it ended meanwhile
                    os.setpriority(os.PRIO_PROCESS, server, before)
            connection.close()  # back to the pool, or ended

    worker = threading.Thread(target=thread, name="background", daemon=True)
    worker.start()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _lower(pid: int) -> None:
    with contextlib.suppress(OSError):  # not ours to lower: it works at its usual priority
        os.setpriority(os.PRIO_PROCESS, pid, BACKGROUND_NICE)


def _local_postgres(pid: int) -> bool:
    """Whether `pid` is a PostgreSQL server process of this machine (the database's host is
    a loopback address or a socket: a remote server's pid means nothing here)."""
    host = connection.settings_dict.get("HOST") or ""
    if host and not (host.startswith("/") or host in ("localhost", "::1")):
        try:
            if not ipaddress.ip_address(host).is_loopback:
                return False
        except ValueError:
            return False
    try:
        return "postgres" in psutil.Process(pid).name()
    except psutil.Error:
        return False
