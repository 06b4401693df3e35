"""Transports: how a driver reaches its cluster (local commands, or SSH to a login node)."""

from orchestration.transports.base import (
    CommandResult,
    FileSpec,
    Transport,
    TransportError,
    retry,
)
from orchestration.transports.local import LocalTransport

__all__ = [
    "CommandResult",
    "FileSpec",
    "LocalTransport",
    "Transport",
    "TransportError",
    "retry",
]
