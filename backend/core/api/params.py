"""Query parameters, checked: a bad one is a 400 that names it, never a 500."""

from __future__ import annotations

from typing import Any

from core.exceptions import ApplicationError


def int_param(request: Any, name: str, default: int, *, low: int, high: int) -> int:
    """A whole-number query parameter within [low, high], or a 400 naming it."""
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApplicationError(f"{name} must be a whole number, got {raw!r}", field=name) from None
    if not low <= value <= high:
        raise ApplicationError(f"{name} must be between {low} and {high}, got {value}", field=name)
    return value
