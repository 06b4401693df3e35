"""Runs created as a set: one COPY of every row, not a model instance per run.

A 100,000-run study is submitted in seconds: the columns every run shares are prepared once
(from a template Run, with its field defaults) as one piece of COPY text, and each run adds
only its id, index, parameters and context to it. The text is written in blocks of a few
hundred kilobytes, so PostgreSQL inserts one block while the next is being made."""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Iterable
from typing import Any

import orjson
from django.db import connection, models
from django.utils import timezone

from studies.identity import context_json, run_identity
from studies.models import Run

_OWN = ("id", "index", "parameters", "context", "identity")  # what differs from run to run
# After this many rows at once the planner's statistics are refreshed in the same step:
# autovacuum would within a minute, and until then a study's first pages were planned for
# one row (a sort of all 100,000 runs for a page of 100: 0.4 s instead of a few ms)
ANALYZE_AFTER = 10_000
_PLANNED = "study_id, tenant_id, backend_id, state, index, queued_at, heartbeat_at"
_BLOCK = 256 * 1024  # characters of COPY text sent at once
# COPY's text format: a backslash, tab, newline or carriage return inside a value is escaped
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def copy_text(value: Any) -> str:
    """One value as COPY's text format writes it (NULL is \\N)."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    return str(value).translate(_ESCAPES)


def _json(value: Any) -> str:
    return _json_text(orjson.dumps(value).decode())


def _json_text(text: str) -> str:
    """JSON text as a COPY value: JSON has no raw tab, newline or carriage return (inside a
    string they are written escaped), so a backslash is the one character to double."""
    return text.replace("\\", "\\\\") if "\\" in text else text


def time_ordered_uuids(count: int) -> list[str]:
    """`count` version 7 UUIDs (RFC 9562) as text, in ascending order: the current Unix
    time in milliseconds, then 74 random bits (sorted here). A study's runs then land at one
    end of the primary key's index instead of on a random page each: inserting 100,000
    random ids dirtied pages all over the index (the COPY's largest cost after the rows)."""
    prefix = f"{time.time_ns() // 1_000_000 & (1 << 48) - 1:012x}"
    tails = sorted(int.from_bytes(os.urandom(10)) >> 6 for _ in range(count))  # 74 bits
    out = []
    for tail in tails:
        rand_a, rand_b = tail >> 62, tail & (1 << 62) - 1
        h = f"{0x7000 | rand_a:04x}{0x8000000000000000 | rand_b:016x}"
        out.append(f"{prefix[:8]}-{prefix[8:]}-{h[:4]}-{h[4:8]}-{h[8:]}")
    return out


def runs_copy(
    *,
    template: Run,
    points: Iterable[tuple[int, dict, dict]],
    identity_base: Any = None,
) -> int:
    """Insert one run per (index, parameters, context), each a copy of `template` otherwise
    (its study, tenant, backend, shape, state and wait reason); how many. With
    `identity_base` (studies.identity), each run's identity is computed from it and its
    context as the row is written. In the caller's transaction: a failure leaves no run
    behind."""
    now = timezone.now()
    concrete = {f.attname: f for f in Run._meta.concrete_fields}
    fields = [f for name, f in concrete.items() if name not in _OWN]
    shared: list[str] = []
    for field in fields:
        if field.attname in ("created_at", "updated_at"):
            shared.append(copy_text(now))
        elif isinstance(field, models.JSONField):
            shared.append(_json(getattr(template, field.attname)))
        else:
            value = field.get_db_prep_save(getattr(template, field.attname), connection)
            shared.append(copy_text(value))
    tail = "\t".join(shared) + "\n"
    columns = ", ".join(
        connection.ops.quote_name(str(f.column)) for f in (*(concrete[n] for n in _OWN), *fields)
    )
    sql = f"COPY {connection.ops.quote_name(Run._meta.db_table)} ({columns}) FROM STDIN"
    count = 0
    ids: list[str] = []
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        block: list[str] = []
        size = 0
        for index, parameters, context in points:
            if not ids:
                ids = time_ordered_uuids(4096)[::-1]  # taken from the end: ascending
            # the context in canonical form (sorted keys; jsonb keeps no order anyway): the
            # same bytes are stored and hashed into the run's identity
            raw = context_json(context)
            identity = run_identity(identity_base, raw) if identity_base is not None else ""
            text = _json_text(raw.decode())
            line = f"{ids.pop()}\t{index}\t{_json(parameters)}\t{text}\t{identity}\t{tail}"
            block.append(line)
            size += len(line)
            count += 1
            if size >= _BLOCK:
                copy.write("".join(block))
                block, size = [], 0
        if block:
            copy.write("".join(block))
    if count >= ANALYZE_AFTER:
        with connection.cursor() as cursor:
            # only the columns the pages' plans depend on: the JSON columns' statistics
            # cost five times as much (0.5 s at 100,000 runs) and no plan reads them
            cursor.execute(f"ANALYZE {connection.ops.quote_name(Run._meta.db_table)} ({_PLANNED})")
    return count
