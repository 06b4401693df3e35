"""Servers in the project, and what a server needs: a flavor, an image, a network.

`ServerClient` is the project's compute side (Nova, with Glance's images and Neutron's
networks as a server needs them) on top of the connection of `client`; the driver is one.
Run servers and image builders carry `windtunnel_kind` in their metadata (and a name that
starts with `wt-`), so the leak reaper finds what the portal made and nothing else.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

from orchestration.drivers.base import DriverError, RunPhase, RunSpec, RunStatus
from orchestration.drivers.openstack.client import OpenStackClient
from orchestration.drivers.openstack.timestamps import created_at

__all__ = [
    "FLAVOR_CACHE_SECONDS",
    "META_ATTEMPT",
    "META_KIND",
    "META_RUN",
    "META_WORKER",
    "ServerClient",
    "smallest_flavor",
]

META_RUN = "windtunnel_run"
META_ATTEMPT = "windtunnel_attempt"
META_KIND = "windtunnel_kind"  # run | builder | pool
META_WORKER = "windtunnel_worker"  # a pool worker's id (docs/pools.md)
FLAVOR_CACHE_SECONDS = 300.0

_FLAVORS: dict[str, tuple[float, list[Any]]] = {}


def smallest_flavor(
    flavors: Sequence[Any], *, cores: int, memory_gb: float, min_disk_gb: float = 0.0
) -> Any | None:
    """The smallest enabled flavor with `cores` vCPUs, `memory_gb` of RAM and the disk."""
    fits = [
        f
        for f in flavors
        if f.vcpus >= cores
        and f.ram >= memory_gb * 1024 - 1e-6
        and (f.disk or 0) >= min_disk_gb
        and getattr(f, "is_disabled", False) is not True
    ]
    return min(fits, key=lambda f: (f.vcpus, f.ram, f.disk or 0, f.name)) if fits else None


class ServerClient(OpenStackClient):
    """Flavors, images, networks and servers of the project."""

    # -- flavors, images, networks ----------------------------------------------------------

    def flavors(self) -> list[Any]:
        """The cloud's flavors, cached for FLAVOR_CACHE_SECONDS per cloud and credentials."""
        key = self.connection_key()
        cached = _FLAVORS.get(key)
        if cached and time.monotonic() - cached[0] < FLAVOR_CACHE_SECONDS:
            return cached[1]
        flavors = self.call("list flavors", lambda: list(self.conn.compute.flavors()))
        _FLAVORS[key] = (time.monotonic(), flavors)
        return flavors

    def flavor_for(self, *, cores: int, memory_gb: float) -> Any:
        """The fixed flavor, or the smallest that fits one node's share of the run."""
        flavors = self.flavors()
        if self.settings["flavor"]:
            for f in flavors:
                if self.settings["flavor"] in (f.name, f.id):
                    if f.vcpus < cores or f.ram < memory_gb * 1024 - 1e-6:
                        raise DriverError(
                            f"flavor {f.name} has {f.vcpus} vCPUs and {f.ram} MB; the run needs "
                            f"{cores} cores and {memory_gb:g} GB per node"
                        )
                    return f
            raise DriverError(f"no flavor {self.settings['flavor']!r} in this cloud")
        found = smallest_flavor(
            flavors, cores=cores, memory_gb=memory_gb, min_disk_gb=self.settings["min_disk_gb"]
        )
        if found is None:
            raise DriverError(
                f"no flavor has {cores} vCPUs and {memory_gb:g} GB: ask the cloud admin for one, "
                "or set settings.flavor"
            )
        return found

    def fitting_flavor(self, *, cores: int, memory_gb: float, min_disk_gb: float) -> Any | None:
        """The smallest enabled flavor with the vCPUs, RAM and disk, or None (an image
        builder's: the backend's fixed `flavor` is for runs)."""
        return smallest_flavor(
            self.flavors(), cores=cores, memory_gb=memory_gb, min_disk_gb=min_disk_gb
        )

    def image_id(self, spec: RunSpec) -> str:
        """The Glance id of the run's image: the study's VM image, or the backend's `image`."""
        ref = spec.image or self.settings["image"]
        if not ref:
            raise DriverError(
                "no VM image: the study needs a ready VM image for this backend (compose one "
                "from packages, or register a Glance image), or set settings.image"
            )
        image = self.find_image(ref)
        if image is None:
            raise DriverError(f"no image {ref!r} in the cloud's image service")
        image_id: str = image.id
        return image_id

    def find_image(self, ref: str, *, what: str = "find image") -> Any | None:
        """The image `ref` (an id or a name) names, or None."""
        return self.call(what, lambda: self.conn.image.find_image(ref, ignore_missing=True))

    def find_images(self, ref: str) -> list[Any]:
        """Every image `ref` names: the one with that id, else all with that name (more than
        one: the name does not say which)."""
        from openstack import exceptions as os_exc

        def query() -> list[Any]:
            try:
                found = self.conn.image.find_image(ref, ignore_missing=True)
            except os_exc.DuplicateResource:
                return list(self.conn.image.images(name=ref))
            return [] if found is None else [found]

        return self.call("find image", query)

    def find_image_by_property(self, key: str, value: str) -> Any | None:
        """An active image whose property `key` is `value` (Glance filters on any
        property), or None."""
        from openstack import exceptions as os_exc

        def query() -> list[dict[str, Any]]:
            response = self.conn.image.get(
                "/images", params={key: value, "status": "active", "limit": 5}
            )
            os_exc.raise_from_response(response)
            images: list[dict[str, Any]] = response.json().get("images", [])
            return images

        found = self.call(f"find image by {key}", query)
        if not found:
            return None
        return self.get_image(found[0]["id"])

    def get_image(self, image_id: str) -> Any:
        """The image with this id."""
        return self.call("get image", lambda: self.conn.image.get_image(image_id))

    def delete_image(self, image_id: str, *, what: str = "delete image") -> None:
        """Delete an image; gone already is fine."""
        self.call(what, lambda: self.conn.image.delete_image(image_id, ignore_missing=True))

    def upload_image(
        self,
        *,
        name: str,
        data: IO[bytes],
        size: int,
        disk_format: str,
        properties: Mapping[str, str],
    ) -> Any:
        """A new image (container format bare) from a disk, streamed once: not retried (the
        stream is spent; delete_images_by_property cleans up after a failure)."""
        return self.call(
            "upload image",
            lambda: self.conn.image.create_image(
                name=name,
                data=data,
                size=size,
                disk_format=disk_format,
                container_format="bare",
                allow_duplicates=True,
                validate_checksum=False,
                meta=dict(properties),
            ),
            retries=(),
        )

    def delete_images_by_property(self, key: str, value: str) -> None:
        """Delete every image whose property `key` is `value` (one try, errors raised as
        openstacksdk's: for cleaning up after a failure, best effort)."""
        response = self.conn.image.get("/images", params={key: value})
        for item in response.json().get("images", []):
            self.conn.image.delete_image(item["id"], ignore_missing=True)

    def network_args(self) -> dict[str, Any]:
        """The `networks` argument of a server create: the backend's network by id, or
        "none" (microversion 2.37)."""
        if self.settings["network"] == "none":
            return {"networks": "none"}
        network = self.call(
            "find network",
            lambda: self.conn.network.find_network(self.settings["network"], ignore_missing=True),
        )
        if network is None:
            raise DriverError(f"no network {self.settings['network']!r}")
        return {"networks": [{"uuid": network.id}]}

    # -- servers ----------------------------------------------------------------------------

    def vm_work_dir(self, spec: RunSpec) -> str:
        """Where the attempt's agent works on its server (or on a stack's nodes)."""
        return f"{self.settings['vm_work_root']}/{spec.run_id}/attempt-{spec.attempt}"

    def server_name(self, spec: RunSpec) -> str:
        """A new name for the attempt's server: unique per start, so a lost create answer is
        found by the leak reaper (metadata), never reused by a later start."""
        return f"wt-{spec.run_id}-a{spec.attempt}-{secrets.token_hex(3)}"

    def create_server(self, args: Mapping[str, Any]) -> Any:
        """Create a server (openstacksdk's create_server arguments); not retried: a lost
        answer is found by name or metadata, not created twice."""
        return self.call(
            "create server", lambda: self.conn.compute.create_server(**args), retries=()
        )

    def get_server(self, server_id: str, *, what: str = "get server") -> Any | None:
        """The server, or None when the cloud no longer knows it."""
        from openstack import exceptions as os_exc

        try:
            return self.call(what, lambda: self.conn.compute.get_server(server_id))
        except os_exc.ResourceNotFound:
            return None

    def delete_server(self, server_id: str, *, what: str = "delete server") -> None:
        """Delete a server; gone already is fine."""
        self.call(what, lambda: self.conn.compute.delete_server(server_id, ignore_missing=True))

    def list_servers(self, filters: Mapping[str, Any] | None = None) -> list[Any]:
        """The project's servers, filtered as Nova filters (e.g. {"name": "^wt-"})."""
        return self.call(
            "list servers", lambda: list(self.conn.compute.servers(**dict(filters or {})))
        )

    def console_tail(self, server_id: str, *, lines: int = 20) -> str:
        """The last `lines` of the server's console; "" when the console does not answer
        (asked once: it only adds detail to a message)."""
        try:
            out = self.call(
                "console log",
                lambda: self.conn.compute.get_server_console_output(server_id, length=lines),
                retries=(),
            )
        except DriverError:
            return ""
        text = (out or {}).get("output", "") if isinstance(out, Mapping) else str(out or "")
        return "\n".join(text.splitlines()[-lines:])

    def snapshot_server(self, server: Any, *, name: str, metadata: Mapping[str, str]) -> Any:
        """Start a snapshot of a (stopped) server into a new image; the image, which Nova
        fills afterwards. Not retried: a second request would make a second image."""
        return self.call(
            "snapshot server",
            lambda: self.conn.compute.create_server_image(
                server, name=name, metadata=dict(metadata), wait=False
            ),
            retries=(),
        )

    def server_status(self, server: Any) -> RunStatus:
        """What a run's server says of its run (the agent's own reports say the rest)."""
        status = str(getattr(server, "status", "") or "").upper()
        if status in ("ERROR",):
            fault = getattr(server, "fault", None) or {}
            detail = fault.get("message") if isinstance(fault, Mapping) else ""
            return RunStatus(phase=RunPhase.EXITED, reason=f"server ERROR: {detail or 'no detail'}")
        if status in ("SHUTOFF", "STOPPED", "SUSPENDED", "SHELVED", "SHELVED_OFFLOADED"):
            return RunStatus(phase=RunPhase.EXITED, reason=f"server {status.lower()}")
        if status in ("DELETED", "SOFT_DELETED"):
            return RunStatus(phase=RunPhase.UNKNOWN, reason="the server is gone")
        if status in ("BUILD", "REBUILD", "REBOOT", "HARD_REBOOT", ""):
            return RunStatus(
                phase=RunPhase.PENDING, reason=f"server {status.lower() or 'building'}"
            )
        created = created_at(server)
        age = self.clock() - created if created else 0.0
        if age < self.settings["boot_timeout"]:
            return RunStatus(
                phase=RunPhase.PENDING,
                reason=f"server active for {age:.0f} s; waiting for the agent (boot timeout "
                f"{self.settings['boot_timeout']:.0f} s)",
            )
        return RunStatus(
            phase=RunPhase.EXITED,
            reason=f"no report from the server within the boot timeout "
            f"({self.settings['boot_timeout']:.0f} s)",
        )

    # -- what the portal made ---------------------------------------------------------------

    def portal_servers(self) -> list[Any]:
        """Every server of this project that a portal made itself: run servers and image
        builders (servers of a Heat stack belong to their stack, see heat.py)."""
        return [
            s
            for s in self.list_servers({"name": "^wt-"})
            if (getattr(s, "metadata", None) or {}).get(META_KIND) in ("run", "builder", "pool")
        ]

    def server_leaks(
        self,
        *,
        tracked: set[tuple[str, int]],
        builders: frozenset[str] | set[str],
        workers: frozenset[str] | set[str] | None = None,
    ) -> list[str]:
        """Delete the run servers whose (run, attempt) is not in `tracked`, the builders not
        in `builders` and the pool workers not in `workers` (None: spare every worker), once
        older than leak_grace; the names of the deleted. A stack's servers are left to their
        stack (heat.stack_leaks)."""
        deleted = []
        now = self.clock()
        for server in self.portal_servers():
            meta = getattr(server, "metadata", None) or {}
            if meta.get("windtunnel_stack"):
                continue  # a stack's server: its stack is reaped whole (heat.py)
            if meta.get(META_KIND) == "builder":
                if server.id in builders:
                    continue
            elif meta.get(META_KIND) == "pool":
                if workers is None or str(meta.get(META_WORKER)) in workers:
                    continue
            else:
                try:
                    key = (str(meta.get(META_RUN)), int(meta.get(META_ATTEMPT, 0)))
                except ValueError:
                    key = ("", 0)
                if key in tracked:
                    continue
            created = created_at(server)
            if created is not None and now - created < self.settings["leak_grace"]:
                continue
            self.delete_server(server.id, what="delete leaked server")
            deleted.append(server.name)
        return deleted
