"""The agents' telemetry batches and `running` reports, answered without Django's request
machinery when all is well.

A watched run's agent sends a batch as soon as a line comes (Nagle-style, at most one per
TELEMETRY_INTERVAL), so 20 watched runs make 200 requests a second at the 0.1 s floor, and
more at a shorter one. Through Django's handler, its middleware and DRF, a batch cost the web
process about three times the CPU of its own work (checking and storing it). The ingest gate
(ingest.api.gate), once it has authenticated the caller and read the body (exactly its
declared length), calls these in a thread: they do exactly what IngestTelemetryView's and
IngestStateView's common cases do: the body parsed and checked (message_of), the batch stored
by the one fenced statement (ingest.services.telemetry_report_fenced), the answer {stop,
interval}. The batch's live message goes to the process's courier at commit, as the view's
does (core.live): published from the event loop, the messages would queue behind the loop's
other work (seconds behind on a loaded machine).

Anything else they answer None, and Django answers it, from the same body: a body that is not
JSON or does not check (Django's 400 names the field), a report naming another attempt than its
token's, a batch sent again (the view acknowledges it), or a batch the fence refused (nothing
was stored: the view tells a stale attempt and a run the portal ended apart). So the answers
are Django's for every case but the stored batch.
"""

from __future__ import annotations

import orjson
from django.db import close_old_connections

from core.exceptions import ApplicationError
from ingest import services
from ingest.api.views import message_of
from studies.choices import RunState
from studies.transitions import hash_run_token, run_report_running
from telemetry.ingest import batch_status
from telemetry.watch import interval_for, is_watched, telemetry_interval


def running_answer(run_id: str, token: str, attempt: int, body: bytes) -> bytes | None:
    """The answer to an agent's `running` report that checks and that the fenced statement
    took (IngestStateView's common case for it: one statement); None for anything else (a
    final report, a body that does not check, a repeat, a stale attempt: Django's view
    answers those). `token` was authenticated as `attempt`'s (ingest.auth.run_caller). When 20 runs start at once their reports come together,
    and through Django each cost the web process several times its own work, while the
    runs' first live lines waited behind them."""
    close_old_connections()
    try:
        try:
            data = message_of(orjson.loads(body), "StateReport")
        except (orjson.JSONDecodeError, ApplicationError):
            return None
        if not isinstance(data, dict) or data.get("state") != RunState.RUNNING:
            return None
        if data["attempt"] != attempt:  # another attempt's token: the view refuses it
            return None
        stop = run_report_running(run_id=run_id, attempt=attempt, token_hash=hash_run_token(token))
        if stop is None:
            return None
        return orjson.dumps({"stop": stop, "interval": telemetry_interval(run_id)})
    finally:
        close_old_connections()


def telemetry_answer(run_id: str, token: str, attempt: int, body: bytes) -> bytes | None:
    """The answer to a batch that checks and that the fenced statement stored; None when it
    does not check or nothing was stored (Django's view then answers: it stores nothing
    twice, since the fence stored nothing). `token` was authenticated as `attempt`'s."""
    close_old_connections()  # as Django does around each request (request_started/finished)
    try:
        try:
            data = message_of(orjson.loads(body), "TelemetryBatch")
        except (orjson.JSONDecodeError, ApplicationError):
            return None
        if not isinstance(data, dict) or data.get("attempt") != attempt:
            return None  # another attempt's token: the view refuses it
        watched = is_watched(run_id)
        try:
            stop = services.telemetry_report_fenced(
                run_id=run_id,
                attempt=attempt,
                token_hash=hash_run_token(token),
                series=data.get("series") or {},
                log=data.get("log") or [],
                watched=watched,
                status=batch_status(data),
                batch_seq=data.get("batch_seq"),
            )
        except ApplicationError:  # the series did not check: nothing was stored
            return None
        if stop is None:
            return None
        return orjson.dumps({"stop": stop, "interval": interval_for(watched=watched)})
    finally:
        close_old_connections()
