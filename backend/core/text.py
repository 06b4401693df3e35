"""Numbers in sentences the portal says to its users."""

from __future__ import annotations


def plural(n: float, one: str, many: str | None = None) -> str:
    """`n` and its unit, singular for exactly one: "1 core", "2 cores", "0.5 GB" (a unit
    that does not change is passed as both)."""
    return f"{n:,g} {one if n == 1 else (many or one + 's')}"


def duration_words(seconds: float) -> str:
    """A duration as people say it: "45 s" below two minutes, "12 min" below two hours,
    else "3.5 h"."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 120 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
