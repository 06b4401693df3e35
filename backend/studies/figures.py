"""A run's resource figures, one definition each for the run page, the study's total,
results.csv and the quota panel.

- **Peak memory** and **CPU time** are measured by the run's agent and come with its final
  report (`Run.peak_memory_bytes`, `Run.cpu_seconds`): the process tree's peak resident
  memory, and the user + system CPU seconds of its steps.
- **Core-hours** are what the run held, not what it burned: the cores it was given
  (`processes`) × the wall time of its steps, from its start until it gave its cores back
  (`released_at`: its steps were over and it only archived) or ended, or until now while
  it runs. A solver that waits on I/O or on other ranks still holds its cores, so
  core-hours ≥ CPU hours; the tenant's core-hour budget counts core-hours.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import FloatField
from django.db.models.expressions import RawSQL

# processes × seconds from the start to the end of the steps (released, else ended, else
# now), in hours, with the hours of a continued run's earlier attempts; NULL for a run that
# never started
CORE_HOURS_SQL = (
    "(processes * EXTRACT(EPOCH FROM (COALESCE(released_at, finished_at, now()) - started_at))"
    " / 3600.0 + carried_core_hours)::float8"
)

# seconds from the start to the end; NULL until both happened (Run.wall_seconds)
WALL_SECONDS_SQL = "EXTRACT(EPOCH FROM (finished_at - started_at))::float8"


def core_hours_expression() -> RawSQL:
    """CORE_HOURS_SQL as an expression over a query of runs (e.g. `Sum(...)` per study)."""
    return RawSQL(CORE_HOURS_SQL, (), output_field=FloatField())


def core_hours_of(
    *,
    processes: int,
    started_at: datetime | None,
    released_at: datetime | None,
    finished_at: datetime | None,
    now: datetime,
    carried: float = 0.0,
) -> float | None:
    """One run's core-hours as CORE_HOURS_SQL counts them (None: it never started), with
    the `carried` hours of its earlier attempts (a run continued or restarted)."""
    if started_at is None:
        return None
    end = released_at or finished_at or now
    return max(processes * (end - started_at).total_seconds() / 3600.0, 0.0) + carried
