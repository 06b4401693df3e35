"""Numbers in sentences the portal says to its users."""

from __future__ import annotations


def plural(n: float, one: str, many: str | None = None) -> str:
    """`n` and its unit, singular for exactly one: "1 core", "2 cores", "0.5 GB" (a unit
    that does not change is passed as both)."""
    return f"{n:,g} {one if n == 1 else (many or one + 's')}"
