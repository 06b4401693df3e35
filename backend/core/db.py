"""Statements that carry large values: parameters bound on the server, float arrays in binary;
and the advisory lock that keeps a periodic pass or a build to one worker at a time.

Django's psycopg cursors bind parameters on the client: every value is written into the SQL
as a quoted literal, which PostgreSQL then lexes and parses. For a telemetry batch (tens of
thousands of floats) that is most of the statement's cost on both sides. `bound_cursor()`
sends the parameters apart from the SQL instead, and a `Float8Array` goes in PostgreSQL's
binary float8[] format, which the server reads without parsing a single number.
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import struct
import sys
from collections.abc import Iterator, Sequence
from typing import cast

import psycopg
from django.db import connection
from psycopg import pq
from psycopg.adapt import Dumper

FLOAT8_ARRAY_OID = 1022
FLOAT8_OID = 701
_HEADER = struct.Struct(">iiiii")  # ndim, has nulls, element type, length, lower bound
_LENGTH = struct.pack(">i", 8)  # every element's length word (no NULL elements here)
_LITTLE = sys.byteorder == "little"


class Float8Array:
    """Finite or NaN floats (no None) as PostgreSQL's binary float8[] value."""

    __slots__ = ("data",)

    def __init__(self, values: Sequence[float]) -> None:
        column = values if isinstance(values, array.array) else array.array("d", values)
        count = len(column)
        words = array.array("d", column)  # a copy: big-endian in place
        if _LITTLE:
            words.byteswap()
        out = bytearray(_HEADER.size + 12 * count)
        _HEADER.pack_into(out, 0, 1, 0, FLOAT8_OID, count, 1)
        # each element is a length word and two 4-byte halves of the double: three strided
        # copies, no Python loop
        body = memoryview(out)[_HEADER.size :].cast("I")
        halves = memoryview(words).cast("B").cast("I")
        body[0::3] = array.array("I", _LENGTH) * count
        body[1::3] = halves[0::2]
        body[2::3] = halves[1::2]
        self.data = bytes(out)

    @classmethod
    def of(cls, values: Sequence[float | None]) -> Float8Array | None:
        """The binary value, or None when `values` holds a None (a NULL element)."""
        if isinstance(values, array.array):
            return cls(values)
        try:  # array() refuses a None with a TypeError: the check, done in C
            return cls(array.array("d", cast("Sequence[float]", values)))
        except TypeError:
            return None


class _Float8ArrayDumper(Dumper):
    format = pq.Format.BINARY
    oid = FLOAT8_ARRAY_OID

    def dump(self, obj: Float8Array) -> bytes:
        return obj.data


@contextlib.contextmanager
def bound_cursor() -> Iterator:
    """A cursor of Django's connection (its transaction, its query log) whose parameters are
    sent apart from the SQL (`%s` placeholders as usual) and Float8Array ones in binary."""
    connection.ensure_connection()
    raw = psycopg.Cursor(connection.connection)
    raw.adapters.register_dumper(Float8Array, _Float8ArrayDumper)
    # django-stubs type make_*cursor's argument as a CursorWrapper; Django passes (and wraps)
    # the driver's own cursor, as here
    cursor = (
        connection.make_debug_cursor(raw)  # type: ignore[arg-type]
        if connection.queries_logged
        else connection.make_cursor(raw)  # type: ignore[arg-type]
    )
    try:
        yield cursor
    finally:
        raw.close()


def lock_key(name: str) -> int:
    """A PostgreSQL advisory lock key for `name` (e.g. an image build, a pool's pass)."""
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextlib.contextmanager
def advisory_lock(name: str) -> Iterator[bool]:
    """Hold a session advisory lock named `name` while the block runs, if it was free:
    yields whether this process holds it (False: another worker does; do nothing)."""
    key = lock_key(name)
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s)", [key])
        held = bool(cur.fetchone()[0])
    try:
        yield held
    finally:
        if held:
            with connection.cursor() as cur:
                cur.execute("SELECT pg_advisory_unlock(%s)", [key])
