"""When an OpenStack resource was made, as the APIs spell it."""

from __future__ import annotations

import datetime as dt
from typing import Any


def created_at(resource: Any) -> float | None:
    """When a server or stack was made (epoch seconds), or None when the cloud does not say.

    Nova answers `created_at` with a Z, Heat `creation_time` or a `created_at` without an
    offset (UTC either way)."""
    raw = getattr(resource, "created_at", None) or getattr(resource, "creation_time", None)
    if not raw:
        return None
    try:
        when = dt.datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()
