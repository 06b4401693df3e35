"""What an agent's reports set off: telemetry stored (telemetry), then the study's
convergence policy applied to the run (runs), and signs of life."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from django.db import transaction

from runs.services import (
    run_backend_end,
    run_heartbeat,
    run_release_cores,
    run_report_end,
    run_stop_by_policy,
)
from studies.models import Run
from studies.transitions import run_record_provenance
from telemetry.batches import Columns
from telemetry.carry import series_carry_over
from telemetry.ingest import (
    Stored,
    telemetry_final_batch,
    telemetry_ingest,
    telemetry_ingest_fenced,
)


class Taken(NamedTuple):
    """What a telemetry batch came to: whether the agent must stop, and whether the batch
    was one sent again (its number stored already: nothing was stored twice)."""

    stop: bool
    duplicate: bool = False


def telemetry_report_fenced(
    *,
    run_id: Any,
    attempt: int,
    token_hash: str,
    series: Any,
    log: Sequence[str],
    watched: bool | None,
    status: dict[str, Any] | None = None,
    batch_seq: int | None = None,
) -> bool | None:
    """The hot path: a batch stored in one statement fenced by token and attempt (and by its
    number, when it has one); whether the agent must stop, or None when the fence stored
    nothing (the caller tells why)."""
    stored = telemetry_ingest_fenced(
        run_id=str(run_id),
        attempt=attempt,
        token_hash=token_hash,
        series=series,
        log=log,
        watched=watched,
        status=status,
        batch_seq=batch_seq,
    )
    return None if stored is None else _apply(run_id, attempt, stored)


def telemetry_report(
    *,
    run: Run,
    attempt: int,
    series: Any,
    log: Sequence[str],
    status: dict[str, Any] | None = None,
    batch_seq: int | None = None,
) -> Taken:
    """The slow path (it tells a stale attempt, a run the portal ended or a batch sent again
    apart): a batch, or an empty one as a sign of life. `status` is what the batch says of
    the run beside its points (telemetry.ingest.batch_status). A batch sent again stores
    nothing and counts as a sign of life."""
    status = status or {}
    stored = telemetry_ingest(
        run=run,
        attempt=attempt,
        series=series,
        log=log,
        heartbeat=True,
        status=status,
        batch_seq=batch_seq,
    )
    if stored is None or stored.duplicate:
        resources: dict[str, Any] = {
            k: status[k] for k in ("cpu_percent", "rss_bytes", "disk_bytes") if k in status
        }
        stop = run_heartbeat(
            run=run, attempt=attempt, phase=status.get("phase", ""), resources=resources
        )
        return Taken(stop, duplicate=stored is not None)
    return Taken(_apply(run.pk, attempt, stored))


def final_report(
    *,
    run_id: Any,
    attempt: int,
    state: str,
    batch: tuple[dict[str, Columns], list[str]],
    exit_code: int | None = None,
    reason: str = "",
    message: str = "",
    solver_converged: bool = False,
    iterations: int | None = None,
    last_time: float | None = None,
    provenance: dict[str, Any] | None = None,
    disk_bytes: int | None = None,
    batch_seq: int | None = None,
    peak_memory_bytes: int | None = None,
    cpu_seconds: float | None = None,
    writes: list[str] | None = None,
) -> bool:
    """The agent's final report, checked (its body and its token) by the caller: on the
    portal's own cores, the cores are given back first (released_at); then the last batch
    it carries is stored (unless its number, `batch_seq`, is stored already: it went as a
    telemetry batch whose answer was lost) and the state it reports applied, with the
    objectives read from all its points, the size its directory ended at (`disk_bytes`) and
    what its steps used (`peak_memory_bytes`, `cpu_seconds`) and the times its case wrote
    completely (`writes`). Whether the batch was such a duplicate.

    All of it in one transaction: a report refused on the way (a stale attempt, a report
    already in) or a database error leaves the run as it was, still counted as holding its
    cores, and the agent may send it again. The backend is asked first, outside it, whether
    it ended the attempt itself (run_backend_end)."""
    run = Run(pk=run_id)
    backend_end = run_backend_end(run=run, attempt=attempt, state=state)
    with transaction.atomic():
        run_release_cores(run_id=run_id, attempt=attempt)  # the next one is scheduled on commit
        _carry_picked_write(run_id, attempt, provenance)
        stored = telemetry_final_batch(
            run_id=run_id, attempt=attempt, batch=batch, batch_seq=batch_seq
        )
        if stored is not None and not stored.duplicate:
            _apply(run_id, attempt, stored)
        if provenance:
            run_record_provenance(run_id=run_id, attempt=attempt, provenance=provenance)
        run_report_end(
            run=run,
            attempt=attempt,
            state=state,
            backend_end=backend_end,
            exit_code=exit_code,
            reason=reason,
            message=message,
            solver_converged=solver_converged,
            iterations=iterations,
            last_time=last_time,
            disk_bytes=disk_bytes,
            peak_memory_bytes=peak_memory_bytes,
            cpu_seconds=cpu_seconds,
            writes=writes,
        )
    return stored is not None and stored.duplicate


def _carry_picked_write(run_id: Any, attempt: int, provenance: Mapping[str, Any] | None) -> None:
    """An attempt requeued after a loss went on from the write its agent picked (the latest
    it found): the series before it are carried over now, before the objectives are read
    (a continuation's write was known, and carried, at dispatch)."""
    picked = (provenance or {}).get("resumed_from")
    if not isinstance(picked, Mapping) or picked.get("source"):  # a warm start begins anew
        return
    asked = Run.objects.filter(pk=run_id, attempt=attempt).values_list("resume", flat=True).first()
    if not isinstance(asked, Mapping) or asked.get("time") != "latest":
        return
    try:
        from_attempt, up_to = int(picked["attempt"]), float(picked["time"])
    except (KeyError, TypeError, ValueError):
        return
    if 0 < from_attempt < attempt:
        series_carry_over(
            run_id=run_id, from_attempt=from_attempt, to_attempt=attempt, up_to=up_to, replace=False
        )


def _apply(run_id: Any, attempt: int, stored: Stored) -> bool:
    stopped = stored.decision is not None and run_stop_by_policy(
        run=Run(pk=run_id),
        attempt=attempt,
        outcome=stored.decision.outcome,
        detail=stored.decision.detail,
    )
    return stored.stop or stopped
