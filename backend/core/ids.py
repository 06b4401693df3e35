"""Ids users type into URLs."""

from __future__ import annotations

import uuid
from typing import Any


def parse_uuid(value: Any) -> uuid.UUID | None:
    """The UUID in `value`, or None when it is not one (a 404, never a 500)."""
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None
