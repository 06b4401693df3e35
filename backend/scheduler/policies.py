"""Admission policies: the order in which a tenant's queued runs are considered, and whether
a run that does not fit holds back the runs behind it.

A policy is a plain object behind one small interface, registered by name and chosen with
WINDTUNNEL_ADMISSION_POLICY. FIFO is the one built in: queued runs in submission order
(study, then index), and a run that does not fit the tenant's quota stops admission (strict
FIFO: later, smaller runs do not overtake it); a full or unavailable backend only holds back
its own runs. Adding one: docs/development/adding-a-policy.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from quotas.fit import Problem
from studies.choices import RunState, StudyState
from studies.models import Run, Study


class Candidate(NamedTuple):
    """A queued run as admission reads it."""

    run_id: Any
    backend_id: int
    processes: int
    memory_gb: float
    nodes: int
    image_id: int | None
    queued_at: datetime
    retry_at: datetime | None


class AdmissionPolicy(Protocol):
    name: str

    def queue(self, cur: Any, *, tenant_id: int) -> Iterator[Candidate]:
        """The tenant's queued runs in the order admission considers them (read lazily:
        admission usually stops early)."""
        ...

    def blocks(self, problem: Problem) -> bool:
        """Whether a run that does not fit stops admission of the runs behind it."""
        ...


class Fifo:
    """First in, first out per tenant; a quota that is full stops the tenant's queue."""

    name = "fifo"
    SCAN_BATCH = 500

    SQL = (
        f"SELECT r.id, r.backend_id, r.processes, r.memory_gb, r.nodes, s.image_id,"
        f" r.queued_at, r.retry_at FROM {Run._meta.db_table} r"
        f" JOIN {Study._meta.db_table} s ON s.id = r.study_id"
        " WHERE r.tenant_id = %s AND r.state = %s"
        # a cancelled study's queued runs are ended in the background: never admitted
        f" AND s.state <> '{StudyState.CANCELLED.value}'"
        " ORDER BY r.queued_at, r.study_id, r.index LIMIT %s OFFSET %s"
    )

    def queue(self, cur: Any, *, tenant_id: int) -> Iterator[Candidate]:
        """SCAN_BATCH runs at a time, each batch one plain query (no server-side cursor and
        its three round trips): admission usually stops within the first."""
        start = 0
        while True:
            cur.execute(self.SQL, [tenant_id, RunState.PENDING, self.SCAN_BATCH, start])
            batch = cur.fetchall()
            for row in batch:
                yield Candidate(*row)
            if len(batch) < self.SCAN_BATCH:
                return
            start += self.SCAN_BATCH

    def blocks(self, problem: Problem) -> bool:
        return problem.limit == "quota"


POLICIES: dict[str, AdmissionPolicy] = {"fifo": Fifo()}


def policy_in_use() -> AdmissionPolicy:
    name = settings.WINDTUNNEL["ADMISSION_POLICY"]
    try:
        return POLICIES[name]
    except KeyError:
        raise ImproperlyConfigured(
            f"WINDTUNNEL_ADMISSION_POLICY={name!r}: known policies are {', '.join(POLICIES)}"
        ) from None
