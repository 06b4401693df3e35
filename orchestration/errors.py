"""The errors a cloud, a cluster or a backend's settings raise, for every part of
orchestration: the drivers (drivers.base re-exports them, the driver interface's home) and
the image composer's bake, which reads a backend's bake settings and catches its cloud's
failures. A module of its own, importing nothing, so that both can use it without importing
each other's packages.
"""

from __future__ import annotations

__all__ = ["DriverError", "SettingsError"]


class DriverError(Exception):
    """A backend refused or failed an operation. `retryable` says whether to try again."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class SettingsError(DriverError):
    """A backend's settings are wrong: `field` names the setting, `message` the fix."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
