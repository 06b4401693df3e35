"""Telemetry ingest: a batch of points becomes one chunk row per series, in one statement.

The portal stores and publishes; it judges the new points by the study's convergence
policy and returns that judgement (a `Decision`): stopping a run is the caller's
(ingest → runs.run_stop_by_policy), never this module's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from django.db import connection, transaction
from django.utils import timezone

from catalog.models import Backend
from core.db import bound_cursor
from core.exceptions import RunEnded, StaleAttempt
from core.live import run_group, send
from core.metrics import INGEST_BATCHES, INGEST_POINTS
from studies.choices import STARTED_STATES, TERMINAL_STATES
from studies.models import Run, Study
from studies.policy import DEFAULT_POLICY, wall_seconds_sql
from telemetry.batches import Columns, clean_batch, extremes, float8s
from telemetry.convergence import Decision, check
from telemetry.models import LogChunk, SeriesChunk
from telemetry.selectors import series_length, series_tail
from telemetry.watch import is_watched


class Stored(NamedTuple):
    """A stored batch: its seq on the run's stream, whether the agent must stop (the portal
    wants it stopped, or ended the run), and what the convergence policy decided. A batch
    sent again (its number stored already) is `duplicate`: nothing was stored."""

    seq: int
    stop: bool
    decision: Decision | None
    duplicate: bool = False


REPLAYED = Stored(0, False, None, duplicate=True)


def telemetry_ingest(
    *,
    run: Run,
    attempt: int,
    series: Mapping[str, Sequence[Sequence[float]]],
    log: Sequence[str] = (),
    heartbeat: bool = False,
    status: Mapping[str, Any] | None = None,
    batch_seq: int | None = None,
) -> Stored | None:
    """Store one batch from the agent as one chunk per series, stamped with the run stream's
    seq, and publish it; judge the new points by the study's convergence policy.

    None when the batch was empty (its heartbeat, if any, is the caller's to record). With
    `heartbeat` the batch also counts as the run's sign of life (one UPDATE does both); a
    batch for an attempt that is over raises StaleAttempt, except for a run the portal ended
    (cancel, policy), whose last points are still kept (and `stop` says so). `status` is
    what a heartbeat would have said (batch_status: phase, CPU, memory, iterations so far),
    recorded with the sign of life. A batch numbered `batch_seq` is stored only when the
    attempt has no batch of that number or a later one stored yet (in the same statement:
    REPLAYED otherwise, and its sign of life is the caller's to record); a batch without a
    number (agents before 1.2) is stored whenever it comes.

    Telemetry commits asynchronously (synchronous_commit off): a database crash can lose the
    last fraction of a second of points, never the run's state, which commits normally.
    """
    clean, lines = clean_batch(series, log)
    if not clean and not lines:
        return None
    row = _store_batch(
        run_id=str(run.pk),
        attempt=attempt,
        heartbeat=heartbeat,
        clean=clean,
        lines=lines,
        status=status,
        batch_seq=batch_seq,
    )
    stop = heartbeat and row is not None and row.stop
    if row is None:
        current = _current(run.pk)
        if _replayed(current, attempt, batch_seq):
            return REPLAYED
        if not (heartbeat and current and current[1] == attempt and current[0] in TERMINAL_STATES):
            raise StaleAttempt()
        # ended by the portal (cancel, policy): keep what came in, and tell the agent to stop,
        # until its final report is in (then the attempt takes nothing more)
        row = _store_batch(
            run_id=str(run.pk),
            attempt=attempt,
            heartbeat=False,
            clean=clean,
            lines=lines,
            batch_seq=batch_seq,
        )
        if row is None:
            if _replayed(_current(run.pk), attempt, batch_seq):  # the same batch meanwhile
                return REPLAYED
            raise RunEnded(current[0])
        stop = True
    decision = _after_store(run=run, attempt=attempt, seq=row.seq, clean=clean, lines=lines)
    return Stored(row.seq, stop, decision)


def telemetry_ingest_fenced(
    *,
    run_id: str,
    attempt: int,
    token_hash: str,
    series: Any,
    log: Sequence[str] = (),
    watched: bool | None = None,
    status: Mapping[str, Any] | None = None,
    batch_seq: int | None = None,
) -> Stored | None:
    """The agents' hot path: telemetry_ingest(heartbeat=True) for a run named by id, its
    token's hash and attempt, in one round trip to PostgreSQL (the fence, the sign of life, the
    chunks and the log in one statement that also returns what the convergence policy needs).

    None when that statement stores nothing: an empty batch, an unknown run, a wrong token, an
    attempt that is over, a run that has ended, or a batch whose number is stored already. The
    caller then takes the slow path, which tells these apart (404, 401, 409, keeping the last
    points of a run the portal ended, or acknowledging a batch sent again).
    """
    clean, lines = clean_batch(series, log)
    if not clean and not lines:
        return None
    row = _store_batch(
        run_id=run_id,
        attempt=attempt,
        heartbeat=True,
        clean=clean,
        lines=lines,
        token_hash=token_hash,
        status=status,
        batch_seq=batch_seq,
    )
    if row is None:
        return None
    run = _run_of(run_id, attempt, row)
    decision = _after_store(
        run=run, attempt=attempt, seq=row.seq, clean=clean, lines=lines, watched=watched
    )
    return Stored(row.seq, row.stop, decision)


def batch_status(data: Mapping[str, Any]) -> dict[str, Any]:
    """What a batch says beside its points (agent-messages.json's TelemetryBatch): a batch
    stands for a heartbeat, so it carries the agent's phase, the process tree's CPU and
    memory, the disk its directory takes and the solver's iteration count so far; as the
    run's columns, only those given."""
    out: dict[str, Any] = {}
    if isinstance(data.get("phase"), str) and data["phase"]:
        out["phase"] = data["phase"][:20]
    resources = data.get("resources") or {}
    if isinstance(resources.get("cpu_percent"), int | float):
        out["cpu_percent"] = float(resources["cpu_percent"])
    if isinstance(resources.get("rss_bytes"), int | float):
        out["rss_bytes"] = int(resources["rss_bytes"])
    if isinstance(resources.get("disk_bytes"), int) and not isinstance(
        resources["disk_bytes"], bool
    ):
        out["disk_bytes"] = resources["disk_bytes"]
    if isinstance(data.get("iterations"), int) and not isinstance(data["iterations"], bool):
        out["iterations"] = data["iterations"]
    return out


def telemetry_check_batch(*, series: Any, log: Sequence[str]) -> tuple[dict, list[str]]:
    """A batch's series as columns and its log lines, checked (ApplicationError naming what
    is wrong): for a caller that must know the batch is good before it acts."""
    return clean_batch(series, log)


def telemetry_final_batch(
    *,
    run_id: Any,
    attempt: int,
    batch: tuple[dict[str, Columns], list[str]],
    batch_seq: int | None = None,
) -> Stored | None:
    """Store the last batch that a final report carries (checked by telemetry_check_batch;
    the caller checked the token).

    Kept under the same fence as any batch, and also for a run the portal ended meanwhile
    (cancel, policy) as long as its agent's final report is not in yet (RunEnded once it
    is). It commits with the final report's transaction, synchronously: the run's end is in
    it. None when nothing was stored, REPLAYED when its number is stored already (it went
    as a telemetry batch whose answer was lost)."""
    clean, lines = batch
    if not clean and not lines:
        return None
    row = _store_batch(
        run_id=str(run_id),
        attempt=attempt,
        heartbeat=True,
        clean=clean,
        lines=lines,
        async_commit=False,
        batch_seq=batch_seq,
    )
    if row is None:
        current = _current(run_id)
        if _replayed(current, attempt, batch_seq):
            return REPLAYED
        if current is None or current[1] != attempt or current[0] not in TERMINAL_STATES:
            raise StaleAttempt()
        row = _store_batch(
            run_id=str(run_id),
            attempt=attempt,
            heartbeat=False,
            clean=clean,
            lines=lines,
            async_commit=False,
            batch_seq=batch_seq,
        )
        if row is None:
            if _replayed(_current(run_id), attempt, batch_seq):
                return REPLAYED
            raise RunEnded(current[0])  # its final report is in already
    run = _run_of(run_id, attempt, row)
    decision = _after_store(run=run, attempt=attempt, seq=row.seq, clean=clean, lines=lines)
    return Stored(row.seq, False, decision)


def _current(run_id: Any) -> tuple[str, int, Any, int] | None:
    """The run's state, attempt, results_at and batch_seq now."""
    return (
        Run.objects.filter(pk=run_id)
        .values_list("state", "attempt", "results_at", "batch_seq")
        .first()
    )


def _replayed(current: tuple[str, int, Any, int] | None, attempt: int, batch_seq: Any) -> bool:
    """Whether a batch numbered `batch_seq` of `attempt` is stored already."""
    return (
        batch_seq is not None
        and current is not None
        and current[1] == attempt
        and current[3] >= batch_seq
    )


def _run_of(run_id: Any, attempt: int, row: _Stored) -> Run:
    """The run as far as the policy needs it, from what the storing statement returned."""
    run = Run(pk=run_id, attempt=attempt, study_id=row.study_id, started_at=row.started_at)
    field = Study._meta.get_field("convergence")
    convergence = field.from_db_value(row.convergence, field.cached_col, connection) or dict(
        DEFAULT_POLICY
    )
    # the wall-time limit that applies: its backend's default or cap may set it
    convergence = {k: v for k, v in convergence.items() if k != "max_wall_seconds"}
    if row.wall_seconds is not None:
        convergence["max_wall_seconds"] = row.wall_seconds
    run.study = Study(pk=row.study_id, convergence=convergence)
    return run


def _after_store(
    *,
    run: Run,
    attempt: int,
    seq: int,
    clean: dict[str, Columns],
    lines: list[str],
    watched: bool | None = None,
) -> Decision | None:
    """Publish a stored batch (to the run's subscribers: only while someone watches it, as
    the caller found just before, else checked after commit) and judge it by the study's
    convergence policy: a Decision when the run must stop."""

    def publish() -> None:
        points = {name: [list(p) for p in zip(*cols, strict=True)] for name, cols in clean.items()}
        send(
            run_group(run.pk),
            {
                "type": "telemetry",
                "id": str(run.pk),
                "seq": seq,
                "attempt": attempt,
                "series": points,  # the live protocol's [[x, y], …]
                "log": lines,
            },
        )

    def publish_if_watched() -> None:
        if is_watched(run.pk):
            publish()

    if watched is None:
        transaction.on_commit(publish_if_watched)
    elif watched:
        transaction.on_commit(publish)
    return policy_decision(run=run, attempt=attempt, new=clean) if clean else None


_STATUS_COLUMNS = ("phase", "cpu_percent", "rss_bytes", "disk_bytes", "iterations")
_RESOURCE_SERIES = {"cpu.percent": "cpu_percent", "memory.rss": "rss_bytes"}


def _resources_in(clean: Mapping[str, Columns]) -> dict[str, Any]:
    """The run's CPU and memory as the batch's own series last saw them (cpu.percent,
    memory.rss): a short run's only batch may be its final report's, which says no more."""
    out: dict[str, Any] = {}
    for name, column in _RESOURCE_SERIES.items():
        ys = [y for y in (clean.get(name) or ((), ()))[1] if y is not None]
        if ys:
            out[column] = int(ys[-1]) if column == "rss_bytes" else float(ys[-1])
    return out


class _Stored(NamedTuple):
    seq: int
    stop: bool
    study_id: Any
    started_at: Any
    convergence: Any
    wall_seconds: float | None  # its study's, its backend's default, capped (studies.policy)


def _store_batch(
    *,
    run_id: str,
    attempt: int,
    heartbeat: bool,
    clean: dict[str, Columns],
    lines: list[str],
    token_hash: str | None = None,
    async_commit: bool = True,
    status: Mapping[str, Any] | None = None,
    batch_seq: int | None = None,
) -> _Stored | None:
    """One statement, its own transaction: bump the run stream's seq (with `heartbeat` also
    the sign of life, fenced by attempt and started state, and by the token's hash when
    given; without, fenced by attempt and a final report not yet in: a run the portal ended)
    and insert the batch's chunks and log lines stamped with it. None when the fence held.
    With `batch_seq`, the fence also holds when the attempt has that batch or a later one
    stored, and the run keeps the number: two copies of a batch, even at once, store once
    (the second waits for the first's row lock, then finds the number taken).

    It commits asynchronously (synchronous_commit off for this transaction only, unless
    `async_commit` is false: inside a caller's transaction that also changes a run's state):
    a database crash may lose the last fraction of a second of points, never a run's state,
    whose reports commit normally. With `heartbeat`, the batch's `status` (batch_status) is
    set on the run too.
    """
    run_table, study_table = Run._meta.db_table, Study._meta.db_table
    backend_table = Backend._meta.db_table
    where = "r.id = %s AND r.attempt = %s"
    sets = "event_seq = r.event_seq + 1"
    params: list[Any] = []
    status = {**_resources_in(clean), **(status or {})}
    if heartbeat:
        sets += ", heartbeat_at = now()"
        for column, value in (status or {}).items():
            if column in _STATUS_COLUMNS:
                sets += f", {column} = %s"
                params.append(value)
    if batch_seq is not None:
        sets += ", batch_seq = %s"
        params.append(batch_seq)
    params += [run_id, attempt]
    if heartbeat:
        where += f" AND r.state IN ({', '.join(['%s'] * len(STARTED_STATES))})"
        params += [*STARTED_STATES]
    else:
        where += " AND r.results_at IS NULL"
    if token_hash is not None:
        where += " AND r.token_hash = %s"
        params.append(token_hash)
    if batch_seq is not None:
        where += " AND r.batch_seq < %s"
        params.append(batch_seq)
    parts = [
        f"s AS (UPDATE {run_table} r SET {sets} FROM {study_table} st, {backend_table} b"
        f" WHERE {where} AND st.id = r.study_id AND b.id = r.backend_id"
        " RETURNING r.event_seq, r.stop_requested, r.study_id, r.started_at, st.convergence,"
        f" {wall_seconds_sql(study='st', backend='b')} AS wall_seconds)"
    ]
    if clean:
        rows = []
        params += [run_id, attempt]
        for name, (xs, ys) in clean.items():
            rows.append("(%s, %s, %s, %s, %s, %s, %s, %s, %s)")
            params += [name, float8s(xs), float8s(ys), min(xs), max(xs)]
            params += extremes(xs, ys)
        parts.append(
            f"c AS (INSERT INTO {SeriesChunk._meta.db_table} (run_id, attempt, name, seq,"
            " event_seq, xs, ys, x_min, x_max, low_x, low_y, high_x, high_y, created_at)"
            " SELECT %s, %s, v.name, s.event_seq, s.event_seq, v.xs::float8[], v.ys::float8[],"
            " v.x_min::float8, v.x_max::float8, v.low_x::float8, v.low_y::float8,"
            " v.high_x::float8, v.high_y::float8, now()"
            f" FROM s, (VALUES {', '.join(rows)})"
            " AS v(name, xs, ys, x_min, x_max, low_x, low_y, high_x, high_y))"
        )
    if lines:  # chunks are ordered by the run stream's seq: no per-series counter
        parts.append(
            f"l AS (INSERT INTO {LogChunk._meta.db_table} (run_id, attempt, seq, event_seq,"
            " lines, created_at) SELECT %s, %s, s.event_seq, s.event_seq, %s::text[], now()"
            " FROM s)"
        )
        params += [run_id, attempt, lines]
    sql = (
        f"WITH {', '.join(parts)} SELECT event_seq, stop_requested, study_id, started_at,"
        " convergence, wall_seconds"
        + (", set_config('synchronous_commit', 'off', true)" if async_commit else "")
        + " FROM s"
    )
    # outside a transaction block the statement is its own transaction (one round trip);
    # inside one (a caller's atomic block) the setting holds for that whole transaction
    with bound_cursor() as cur:
        cur.execute(sql, params)
        row = cur.fetchone()
    if row is None:
        return None
    INGEST_BATCHES.inc()
    if clean:
        INGEST_POINTS.inc(sum(len(xs) for xs, _ in clean.values()))
    return _Stored(int(row[0]), bool(row[1]), row[2], row[3], row[4], row[5])


def policy_decision(*, run: Run, attempt: int, new: Mapping[str, Columns]) -> Decision | None:
    """What the study's convergence policy says of the newest points (and the run's wall
    time): a Decision to stop the run, or None."""
    policy = run.study.convergence or DEFAULT_POLICY
    iterations = 0
    if policy.get("converge") and policy.get("min_iterations"):
        residual = next((n for n in sorted(new) if n.startswith("residual.")), None)
        iterations = series_length(run=run, attempt=attempt, name=residual) if residual else 0
    decision = check(
        policy,
        new=new,
        history=lambda name, n: series_tail(run=run, attempt=attempt, name=name, n=n),
        iterations=iterations,
    )
    if decision is None and policy.get("max_wall_seconds") and run.started_at:
        elapsed = (timezone.now() - run.started_at).total_seconds()
        if elapsed > policy["max_wall_seconds"]:
            decision = Decision(
                "max_wall_time",
                f"ran {elapsed:.0f} s, over the {policy['max_wall_seconds']:g} s limit",
            )
    return decision
