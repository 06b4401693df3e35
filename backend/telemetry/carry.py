"""A resumed attempt's series begin with its earlier attempt's points up to the write it
starts from (studies.continuation): copied under the new attempt's number when it is
dispatched, so every read of a run's current attempt (plots, objectives, trust) sees one
series that goes on. Chunks are ordered by the run stream's seq, which only grows: the
copies sort before anything the new attempt sends."""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

from telemetry.batches import extremes
from telemetry.models import SeriesChunk

_COLUMNS = (
    "run_id, attempt, name, seq, event_seq, xs, ys, x_min, x_max, low_x, low_y, high_x, high_y,"
    " created_at"
)


@transaction.atomic
def series_carry_over(
    *, run_id: Any, from_attempt: int, to_attempt: int, up_to: float, replace: bool = True
) -> int:
    """Copy attempt `from_attempt`'s points with x ≤ `up_to` to `to_attempt` (with `replace`,
    its chunks go first: copies from a dispatch tried before; without, at its end, its own
    points stay); the chunks written."""
    table = SeriesChunk._meta.db_table
    with connection.cursor() as cur:
        if replace:
            cur.execute(
                f"DELETE FROM {table} WHERE run_id = %s AND attempt = %s", [run_id, to_attempt]
            )
        cur.execute(
            f"INSERT INTO {table} ({_COLUMNS}) SELECT run_id, %s, name, seq, event_seq, xs, ys,"
            " x_min, x_max, low_x, low_y, high_x, high_y, created_at"
            f" FROM {table} WHERE run_id = %s AND attempt = %s AND x_max <= %s",
            [to_attempt, run_id, from_attempt, up_to],
        )
        copied = cur.rowcount
    straddling = SeriesChunk.objects.filter(
        run_id=run_id, attempt=from_attempt, x_min__lte=up_to, x_max__gt=up_to
    )
    trimmed = []
    for chunk in straddling:
        keep = sum(1 for x in chunk.xs if x <= up_to)
        xs, ys = chunk.xs[:keep], chunk.ys[:keep]
        low_x, low_y, high_x, high_y = extremes(xs, ys)
        trimmed.append(
            SeriesChunk(
                run_id=run_id,
                attempt=to_attempt,
                name=chunk.name,
                seq=chunk.seq,
                event_seq=chunk.event_seq,
                xs=xs,
                ys=ys,
                x_min=min(xs),
                x_max=max(xs),
                low_x=low_x,
                low_y=low_y,
                high_x=high_x,
                high_y=high_y,
            )
        )
    SeriesChunk.objects.bulk_create(trimmed)
    return copied + len(trimmed)
