"""What the portal asks of a cloud that keeps VM images: the `VmImageHost` protocol (the
calls of a bake, an upload and a registration), and the names and properties a VM image
and its builder carry there.

Declared by the composer, which bakes on it (bake.py); the OpenStack driver implements it
(orchestration/drivers/openstack/servers.py), and drivers.capabilities lists it with the
other optional capabilities of a driver.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any, Protocol, runtime_checkable

__all__ = [
    "META_BACKEND",
    "META_DIGEST",
    "META_IMAGE",
    "META_KIND",
    "VmImageHost",
    "builder_name",
    "glance_name",
]

META_KIND = "windtunnel_kind"  # "builder": the driver's leak reaper spares builders in progress
META_DIGEST = "windtunnel_digest"  # same digest, no rebake: a bake looks for it first
META_IMAGE = "windtunnel_image"
META_BACKEND = "windtunnel_backend"


@runtime_checkable
class VmImageHost(Protocol):
    """A cloud that keeps VM images and boots servers from them: what a bake, an upload and
    a registration ask of it. Failures are DriverError (retryable when they may pass)."""

    @property
    def settings(self) -> Mapping[str, Any]:
        """The backend's checked settings (a bake names the `network` in its log)."""
        ...

    def find_image(self, ref: str, *, what: str = "find image") -> Any | None:
        """The image `ref` (an id or a name) names, or None."""
        ...

    def find_images(self, ref: str) -> list[Any]:
        """Every image `ref` names: the one with that id, else all with that name."""
        ...

    def find_image_by_property(self, key: str, value: str) -> Any | None:
        """An active image whose property `key` is `value`, or None."""
        ...

    def get_image(self, image_id: str) -> Any: ...

    def delete_image(self, image_id: str, *, what: str = "delete image") -> None: ...

    def upload_image(
        self,
        *,
        name: str,
        data: IO[bytes],
        size: int,
        disk_format: str,
        properties: Mapping[str, str],
    ) -> Any:
        """A new image from a disk (qcow2 or raw), sent once (no retries)."""
        ...

    def delete_images_by_property(self, key: str, value: str) -> None:
        """Delete every image whose property `key` is `value` (no retries)."""
        ...

    def flavors(self) -> list[Any]: ...

    def fitting_flavor(self, *, cores: int, memory_gb: float, min_disk_gb: float) -> Any | None:
        """The smallest enabled flavor with the vCPUs, RAM and disk, or None."""
        ...

    def network_args(self) -> dict[str, Any]:
        """The `networks` argument of a server create for the backend's network."""
        ...

    def list_servers(self, filters: Mapping[str, Any] | None = None) -> list[Any]: ...

    def create_server(self, args: Mapping[str, Any]) -> Any:
        """Create a server (not retried)."""
        ...

    def get_server(self, server_id: str, *, what: str = "get server") -> Any | None:
        """The server, or None when the cloud no longer knows it."""
        ...

    def delete_server(self, server_id: str, *, what: str = "delete server") -> None: ...

    def console_tail(self, server_id: str, *, lines: int = 20) -> str:
        """The last lines of the server's console ("" when the console does not answer)."""
        ...

    def snapshot_server(self, server: Any, *, name: str, metadata: Mapping[str, str]) -> Any:
        """Start a snapshot of a stopped server into a new image (not retried); the image."""
        ...


def _hex(digest: str) -> str:
    return digest.split(":", 1)[-1]


def builder_name(*, digest: str, backend: str) -> str:
    """The builder server's name (a step that died after its create finds it by name)."""
    return f"wt-bake-{_hex(digest)[:12]}-{backend}"


def glance_name(*, name: str, digest: str) -> str:
    """The name of the image a bake or an upload puts into the image service."""
    return f"windtunnel-{name}-{_hex(digest)[:12]}"
