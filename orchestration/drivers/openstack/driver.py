"""The OpenStack driver: one server per run (a Heat stack for multi-node MPI), via openstacksdk.

A run's server boots the study's VM image (baked from the composer's cloud-init recipe, see
docs/images.md) with user data that writes run.json and starts the agent (boot.py); the
agent downloads the case source from the portal with its run token and reports like
everywhere else. The server is deleted when the run ends, fails or is cancelled; servers
carry the run id in their name and metadata, so the leak reaper can delete any server the
portal no longer tracks.

Warm pools (docs/pools.md): the driver boots pool workers (PoolHost), servers whose pilot
leases runs from the portal; a leased run's handle is "worker:<server id>/<worker id>", and
its server outlives the run (the portal deletes it when it scales the pool down).

Handles: "server:<id>" for one server, "stack:<name>/<id>" for a Heat stack (heat.py). The
driver is the project's ServerClient (servers.py, on client.py's connection and calls), and
so the VmImageHost the composer bakes VM images on (composer/vm_host.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from orchestration.composer.bake import bake_settings
from orchestration.drivers.base import (
    Capabilities,
    CloudLimits,
    DriverBase,
    DriverContext,
    DriverError,
    RunPhase,
    RunSpec,
    RunStatus,
    SettingsError,
    register,
)
from orchestration.drivers.capabilities import WorkerSpec
from orchestration.drivers.openstack.boot import b64, pilot_user_data, user_data
from orchestration.drivers.openstack.heat import (
    delete_stack,
    poll_stack,
    stack_events,
    stack_leaks,
    start_stack,
)
from orchestration.drivers.openstack.servers import (
    META_ATTEMPT,
    META_KIND,
    META_RUN,
    META_WORKER,
    ServerClient,
)
from orchestration.drivers.openstack.settings import SECRET_FIELDS, validate_settings

__all__ = ["OpenStackDriver"]

_RELEASED: dict[str, None] = {}  # handles this process deleted (insertion-ordered)


@register("openstack")
class OpenStackDriver(ServerClient, DriverBase):
    """A server per run (a Heat stack per multi-node run) in an OpenStack project."""

    holds_nodes: ClassVar[bool] = True
    frees_on_end: ClassVar[bool] = True
    image_kind: ClassVar[str | None] = "vm"
    sandbox: ClassVar[str] = "uid"  # the VM is the run's own machine
    secret_fields: ClassVar[tuple[str, ...]] = SECRET_FIELDS

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], context: DriverContext) -> OpenStackDriver:
        return cls(
            **{
                **settings,
                "cores": context.cores or settings.get("cores"),
                "memory_gb": context.memory_gb or settings.get("memory_gb"),
                "max_nodes": context.max_nodes if context.cores else settings.get("max_nodes"),
                "secrets": context.secrets or settings.get("secrets") or {},
            }
        )

    @classmethod
    def validate_settings(
        cls, settings: Mapping[str, Any], *, secrets: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The settings checked, the bake settings of VM images too (the backend hosts
        them: composer.bake); with auth_url, the secret that goes with it is required."""
        validate_settings(settings)
        bake_settings(settings)
        if settings.get("auth_url") and not (
            secrets.get("application_credential_secret") or secrets.get("password")
        ):
            raise SettingsError(
                "secrets.application_credential_secret",
                "auth_url needs secrets.application_credential_secret (with settings."
                "application_credential_id) or secrets.password (with username and project)",
            )
        return {k: v for k, v in settings.items() if v not in (None, "")}

    def __init__(self, *, secrets: Mapping[str, Any] | None = None, **settings: Any) -> None:
        super().__init__(validate_settings(settings), secrets or {})
        self.cores = int(settings.get("cores") or 0)
        self.memory_gb = float(settings.get("memory_gb") or 0.0)
        self.max_nodes = int(settings.get("max_nodes") or 1)

    # -- Driver ---------------------------------------------------------------------------

    def prepare(self, spec: RunSpec) -> None:
        if spec.nodes > max(self.max_nodes, 1):
            raise DriverError(
                f"the run needs {spec.nodes} nodes; this backend allows {self.max_nodes}"
            )

    def start(self, spec: RunSpec) -> str:
        if spec.nodes > 1:
            return start_stack(self, spec)
        per_node = spec.processes
        flavor = self.flavor_for(cores=per_node, memory_gb=spec.memory_gb)
        image_id = self.image_id(spec)
        name = self.server_name(spec)
        data = user_data(spec, work_dir=self.vm_work_dir(spec), python=self.settings["vm_python"])
        args: dict[str, Any] = {
            "name": name,
            "image_id": image_id,
            "flavor_id": flavor.id,
            "user_data": b64(data),
            "metadata": {META_RUN: spec.run_id, META_ATTEMPT: str(spec.attempt), META_KIND: "run"},
            **self.network_args(),
        }
        if self.settings["key_name"]:
            args["key_name"] = self.settings["key_name"]
        if self.settings["security_groups"]:
            args["security_groups"] = [{"name": g} for g in self.settings["security_groups"]]
        if self.settings["availability_zone"]:
            args["availability_zone"] = self.settings["availability_zone"]
        server = self.create_server(args)
        return f"server:{server.id}"

    def poll(self, handle: str) -> RunStatus:
        kind, _, ident = handle.partition(":")
        if kind == "stack":
            return poll_stack(self, ident)
        if kind == "worker":
            return self._poll_worker(ident.partition("/")[0])
        if kind != "server" or not ident:
            return RunStatus(phase=RunPhase.UNKNOWN, reason="not an OpenStack handle")
        server = self.get_server(ident)
        if server is None:
            if handle in _RELEASED:  # we deleted it: the agent with it
                return RunStatus(phase=RunPhase.EXITED, reason="server deleted by the portal")
            return RunStatus(phase=RunPhase.UNKNOWN, reason="the server is gone")
        if handle in _RELEASED:
            return RunStatus(phase=RunPhase.EXITED, reason="server being deleted")
        return self.server_status(server)

    def cancel(self, handle: str, *, grace: float = 10.0) -> None:
        self.release(handle)

    def collect(self, handle: str) -> None:
        self.release(handle)

    def release(self, handle: str) -> None:
        """Delete what the handle holds (a server, or a Heat stack); gone already is fine. A
        pool worker's server outlives its runs: the portal deletes it (delete_worker), and
        tells the pilot to stop a run's agent."""
        kind, _, ident = handle.partition(":")
        if kind == "stack":
            delete_stack(self, ident)
            return
        if kind != "server" or not ident:
            return
        self.delete_server(ident)
        _RELEASED[handle] = None
        while len(_RELEASED) > 10_000:  # remembered for poll() in this process, bounded
            _RELEASED.pop(next(iter(_RELEASED)))

    # -- PoolHost ---------------------------------------------------------------------------

    def pool_shape(self, *, flavor: str, image: str) -> tuple[int, float]:
        """A pool's worker shape checked against the cloud: (vCPUs, RAM in GB) of `flavor`;
        SettingsError naming `flavor` or `image` when the cloud has no such thing."""
        found = next((f for f in self.flavors() if flavor in (f.name, f.id)), None)
        if found is None:
            raise SettingsError("flavor", f"no flavor {flavor!r} in this cloud")
        if not image or self.find_image(image) is None:
            raise SettingsError("image", f"no image {image!r} in the cloud's image service")
        return int(found.vcpus), float(found.ram) / 1024

    def boot_worker(self, worker: WorkerSpec) -> tuple[str, str]:
        """Create a pool worker's server, its pilot in the user data; (server id, name)."""
        found = next((f for f in self.flavors() if worker.flavor in (f.name, f.id)), None)
        if found is None:
            raise DriverError(f"no flavor {worker.flavor!r} in this cloud")
        image = self.find_image(worker.image)
        if image is None:
            raise DriverError(f"no image {worker.image!r} in the cloud's image service")
        root = self.settings["vm_work_root"]
        data = pilot_user_data(
            worker.pilot_config(work_root=root), work_root=root, python=self.settings["vm_python"]
        )
        args: dict[str, Any] = {
            "name": f"wt-pool-{worker.pool}-{worker.worker_id[:8]}",
            "image_id": image.id,
            "flavor_id": found.id,
            "user_data": b64(data),
            "metadata": {
                META_KIND: "pool",
                META_WORKER: worker.worker_id,
                "windtunnel_pool": worker.pool,
            },
            **self.network_args(),
        }
        if self.settings["key_name"]:
            args["key_name"] = self.settings["key_name"]
        if self.settings["security_groups"]:
            args["security_groups"] = [{"name": g} for g in self.settings["security_groups"]]
        if self.settings["availability_zone"]:
            args["availability_zone"] = self.settings["availability_zone"]
        server = self.create_server(args)
        return str(server.id), str(server.name)

    def worker_server(self, server_id: str) -> str:
        """A worker's server: building | active | error | gone."""
        server = self.get_server(server_id)
        if server is None:
            return "gone"
        status = str(getattr(server, "status", "") or "").upper()
        if status in ("ACTIVE",):
            return "active"
        if status in ("BUILD", "REBUILD", "REBOOT", "HARD_REBOOT", ""):
            return "building"
        if status in ("DELETED", "SOFT_DELETED"):
            return "gone"
        return "error"

    def delete_worker(self, server_id: str) -> None:
        """Delete a worker's server; gone already is fine."""
        if server_id:
            self.delete_server(server_id, what="delete pool worker")

    def _poll_worker(self, server_id: str) -> RunStatus:
        state = self.worker_server(server_id) if server_id else "gone"
        if state == "active":
            return RunStatus(phase=RunPhase.RUNNING, reason="on a pool worker")
        if state == "building":
            return RunStatus(phase=RunPhase.PENDING, reason="the pool worker is booting")
        if state == "gone":
            return RunStatus(phase=RunPhase.UNKNOWN, reason="the pool worker's server is gone")
        return RunStatus(phase=RunPhase.EXITED, reason="the pool worker's server failed")

    def capabilities(self) -> Capabilities:
        return Capabilities(
            kind="openstack",
            cores=self.cores,
            memory_gb=self.memory_gb,
            max_nodes=self.max_nodes,
            mpi=True,
            remote=True,
        )

    # -- CloudLimited, LeakReaper, RunEvents, HealthCheck (VmImageHost: see servers.py) -----

    def cloud_limits(self) -> CloudLimits:
        absolute = self.call("read limits", lambda: self.conn.compute.get_limits()).absolute

        def limit(value: Any) -> int | None:
            return None if value is None or int(value) < 0 else int(value)

        ram = limit(absolute.total_ram)
        return CloudLimits(
            cores=limit(absolute.total_cores),
            ram_gb=None if ram is None else ram / 1024,
            instances=limit(absolute.instances),
            cores_used=int(absolute.total_cores_used or 0),
            ram_gb_used=int(absolute.total_ram_used or 0) / 1024,
            instances_used=int(absolute.instances_used or 0),
        )

    def reap_leaks(
        self,
        *,
        tracked: set[tuple[str, int]],
        builders: frozenset[str] | set[str] = frozenset(),
        workers: frozenset[str] | set[str] | None = None,
    ) -> list[str]:
        """Delete run servers and stacks whose (run, attempt) the portal does not track, once
        older than leak_grace (one being created has no handle stored yet), sparing the image
        builders in `builders` and the pool workers in `workers` (None: every worker); the
        names of the deleted."""
        return self.server_leaks(tracked=tracked, builders=builders, workers=workers) + stack_leaks(
            self, tracked=tracked
        )

    def run_events(self, handle: str, *, since: str | None) -> tuple[list[str], str | None]:
        """A multi-node run's Heat events after `since`; nothing for a single server."""
        kind, _, ident = handle.partition(":")
        if kind != "stack":
            return [], since
        return stack_events(self, ident, since=since)

    def check(self) -> dict[str, Any]:
        """What an admin sees when registering the backend: can we log in, what is there."""
        limits = self.cloud_limits()
        flavors = self.flavors()
        return {
            "ok": True,
            "capacity": {"cores": self.cores, "memory_gb": self.memory_gb, "nodes": self.max_nodes},
            "project_limits": limits.to_dict(),
            "flavors": sorted(f.name for f in flavors),
            "network": self.settings["network"],
        }
