"""Enqueue work and publish events only after the transaction that caused them commits."""

from __future__ import annotations

from typing import Any

from django.db import transaction


def enqueue_on_commit(task: Any, *args: Any, **kwargs: Any) -> None:
    """`task.delay(*args)` once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: task.delay(*args, **kwargs))
