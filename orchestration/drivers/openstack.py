"""The OpenStack driver: one server per run (a Heat stack for multi-node MPI), via openstacksdk.

A run's server boots the study's VM image (baked from the composer's cloud-init recipe, see
docs/images.md) with user data that writes run.json and starts the agent; the agent downloads
the case source from the portal with its run token and reports like everywhere else. The
server is deleted when the run ends, fails or is cancelled; servers carry the run id in their
name and metadata, so the leak reaper can delete any server the portal no longer tracks.

Handles: "server:<id>" for one server, "stack:<name>/<id>" for a Heat stack.

User data is built from validated settings and values the portal made itself; run.json sits
in a quoted here-document, so nothing in it is ever expanded by a shell.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from orchestration.drivers.base import (
    Capabilities,
    DriverError,
    RunPhase,
    RunSpec,
    RunStatus,
    register,
)

__all__ = [
    "META_ATTEMPT",
    "META_RUN",
    "CloudLimits",
    "OpenStackDriver",
    "SettingsError",
    "user_data",
    "validate_settings",
]

META_RUN = "windtunnel_run"
META_ATTEMPT = "windtunnel_attempt"
META_KIND = "windtunnel_kind"  # run | builder
COMPUTE_MICROVERSION = "2.79"  # ≥ 2.37 for networks='none'
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@ -]{0,254}$")
_PATH = re.compile(r"^/[A-Za-z0-9._/-]{1,200}$")
_RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0)
T = TypeVar("T")


class SettingsError(DriverError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


# keystone fields a backend's settings may carry; the password or application credential
# secret lives in the backend's encrypted secrets
AUTH_FIELDS = (
    "auth_url",
    "application_credential_id",
    "username",
    "user_domain_name",
    "project_name",
    "project_domain_name",
    "project_id",
)


def _opt_name(raw: Mapping[str, Any], key: str, what: str) -> str:
    value = raw.get(key) or ""
    if value and (not isinstance(value, str) or not _NAME.match(value)):
        raise SettingsError(key, f"{what} must be a name or id (letters, digits, ._:/@- )")
    return value


def _num(raw: Mapping[str, Any], key: str, default: float, lo: float, hi: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        raise SettingsError(key, f"must be a number from {lo:g} to {hi:g}")
    return float(value)


def validate_settings(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The backend's settings, checked; SettingsError names the field and the fix."""
    if not isinstance(raw, Mapping):
        raise SettingsError("settings", "must be an object")
    network = raw.get("network", "none")
    if network != "none":
        network = _opt_name(raw, "network", "network")
        if not network:
            raise SettingsError("network", 'give a network name or id, or "none"')
    groups = raw.get("security_groups") or []
    if not isinstance(groups, list) or not all(
        isinstance(g, str) and _NAME.match(g) for g in groups
    ):
        raise SettingsError("security_groups", "must be a list of security group names")
    work_root = raw.get("vm_work_root", "/var/lib/windtunnel/runs")
    if not isinstance(work_root, str) or not _PATH.match(work_root) or ".." in work_root:
        raise SettingsError("vm_work_root", "must be an absolute path of plain characters")
    python = raw.get("vm_python", "python3")
    if not isinstance(python, str) or not re.match(r"^[A-Za-z0-9._/-]{1,200}$", python):
        raise SettingsError("vm_python", "must be a command name or absolute path")
    clouds_yaml = raw.get("clouds_yaml") or ""
    if clouds_yaml and (not isinstance(clouds_yaml, str) or not clouds_yaml.startswith("/")):
        raise SettingsError("clouds_yaml", "must be an absolute path to a clouds.yaml")
    auth_url = raw.get("auth_url") or ""
    if auth_url and (not isinstance(auth_url, str) or not re.match(r"^https?://\S+$", auth_url)):
        raise SettingsError("auth_url", "must be the Keystone URL, e.g. https://keystone:5000/v3")
    auth = {k: _opt_name(raw, k, k.replace("_", " ")) for k in AUTH_FIELDS if k != "auth_url"}
    if not raw.get("cloud") and not auth_url:
        raise SettingsError(
            "cloud",
            "give cloud (an entry of clouds.yaml) or auth_url with an application credential "
            "id (or username and project) and the secret in the backend's secrets",
        )
    return {
        "auth_url": auth_url,
        **auth,
        "cloud": _opt_name(raw, "cloud", "cloud (a clouds.yaml entry)"),
        "clouds_yaml": clouds_yaml,
        "region": _opt_name(raw, "region", "region"),
        "flavor": _opt_name(raw, "flavor", "flavor"),
        "image": _opt_name(raw, "image", "image"),
        "network": network,
        "security_groups": groups,
        "key_name": _opt_name(raw, "key_name", "key pair"),
        "availability_zone": _opt_name(raw, "availability_zone", "availability zone"),
        "boot_timeout": _num(raw, "boot_timeout", 900, 5, 86_400),
        "leak_grace": _num(raw, "leak_grace", 300, 0, 86_400),
        "api_timeout": _num(raw, "api_timeout", 30, 1, 600),
        "min_disk_gb": _num(raw, "min_disk_gb", 0, 0, 100_000),
        # multi-node stacks (openstack_heat): shared volume size (0: none; needs Cinder) and
        # how long the head waits for its workers
        "volume_size_gb": int(_num(raw, "volume_size_gb", 0, 0, 65_536)),
        "worker_wait": int(_num(raw, "worker_wait", 900, 30, 86_400)),
        "vm_work_root": work_root.rstrip("/"),
        "vm_python": python,
    }


@dataclasses.dataclass(frozen=True, kw_only=True)
class CloudLimits:
    """The project's compute limits (None: unlimited) and what is in use now."""

    cores: int | None
    ram_gb: float | None
    instances: int | None
    cores_used: int
    ram_gb_used: float
    instances_used: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def vm_run_json(spec: RunSpec, *, work_dir: str) -> dict[str, Any]:
    """run.json for an agent on a VM: its own work dir, the case downloaded from the portal,
    and a longer window for the final reports (a cloud network may be slower to reach)."""
    data = json.loads(spec.to_json())
    data.update(
        work_dir=work_dir, case_dir=f"{work_dir}/source", fetch_case=True, final_timeout=600
    )
    return data


def user_data(spec: RunSpec, *, work_dir: str, python: str) -> str:
    """The server's boot script: write run.json, start the agent, log next to it."""
    body = json.dumps(vm_run_json(spec, work_dir=work_dir), separators=(",", ":"))
    if "\n" in body:  # json.dumps escapes newlines; keep the here-document sound regardless
        raise DriverError("run.json must fit on one line")
    return (
        "#!/bin/sh\n"
        f"# Windtunnel run {spec.run_id} attempt {spec.attempt} (written by the portal)\n"
        "set -eu\n"
        "umask 077\n"
        f"W='{work_dir}'\n"
        'mkdir -p "$W"\n'
        "cat > \"$W/run.json\" <<'WINDTUNNEL_RUN_JSON'\n"
        f"{body}\n"
        "WINDTUNNEL_RUN_JSON\n"
        "if [ -r /etc/windtunnel/env ]; then set -a; . /etc/windtunnel/env; set +a; fi\n"
        'cd "$W"\n'
        f'exec {python} -m orchestration.agent "$W/run.json" >> "$W/agent.log" 2>&1\n'
    )


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


def _created_at(server: Any) -> float | None:
    raw = getattr(server, "created_at", None) or getattr(server, "creation_time", None)
    if not raw:
        return None
    try:
        return dt.datetime.fromisoformat(str(raw).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


_RELEASED: dict[str, None] = {}  # handles this process deleted (insertion-ordered)
_CONNECTIONS: dict[str, Any] = {}
_CONNECTIONS_LOCK = threading.Lock()
_FLAVORS: dict[str, tuple[float, list[Any]]] = {}
FLAVOR_CACHE_SECONDS = 300.0


@register("openstack")
class OpenStackDriver:
    name = "openstack"

    def __init__(self, *, secrets: Mapping[str, Any] | None = None, **settings: Any) -> None:
        known = validate_settings(settings)
        self.settings = known
        self.secrets = dict(secrets or {})
        self.cores = int(settings.get("cores") or 0)
        self.memory_gb = float(settings.get("memory_gb") or 0.0)
        self.max_nodes = int(settings.get("max_nodes") or 1)
        self.clock: Callable[[], float] = time.time
        self.sleep: Callable[[float], Any] = time.sleep

    # -- connection -----------------------------------------------------------------------

    def _connection_key(self) -> str:
        keys = ("cloud", "clouds_yaml", "region", "api_timeout", *AUTH_FIELDS)
        return json.dumps(
            [{k: self.settings.get(k) for k in keys}, self.secrets], sort_keys=True, default=str
        )

    @property
    def conn(self) -> Any:
        """One openstacksdk Connection per cloud and credentials in this process."""
        key = self._connection_key()
        with _CONNECTIONS_LOCK:
            found = _CONNECTIONS.get(key)
            if found is None:
                found = self._connect()
                _CONNECTIONS[key] = found
        return found

    def _connect(self) -> Any:
        import openstack
        import openstack.config

        options: dict[str, Any] = {
            "compute_api_version": COMPUTE_MICROVERSION,
            "api_timeout": self.settings["api_timeout"],
        }
        if self.settings["region"]:
            options["region_name"] = self.settings["region"]
        try:
            if self.settings["auth_url"]:
                auth = {k: self.settings[k] for k in AUTH_FIELDS if self.settings.get(k)}
                if self.secrets.get("application_credential_secret"):
                    auth["application_credential_secret"] = self.secrets[
                        "application_credential_secret"
                    ]
                    auth_type = "v3applicationcredential"
                elif self.secrets.get("password"):
                    auth["password"] = self.secrets["password"]
                    auth_type = "password"
                else:
                    raise DriverError(
                        "auth_url is set but no secret is stored: give secrets."
                        "application_credential_secret (or secrets.password)"
                    )
                return openstack.connection.Connection(auth=auth, auth_type=auth_type, **options)
            files = [self.settings["clouds_yaml"]] if self.settings["clouds_yaml"] else None
            config = openstack.config.OpenStackConfig(config_files=files)
            region = config.get_one(cloud=self.settings["cloud"], **options)
            return openstack.connection.Connection(config=region)
        except DriverError:
            raise
        except Exception as exc:  # noqa: BLE001 — openstacksdk raises many kinds
            raise DriverError(f"cannot connect to the cloud: {exc}", retryable=True) from exc

    def _call(
        self, what: str, fn: Callable[[], T], *, retries: Sequence[float] = _RETRY_DELAYS
    ) -> T:
        """An API call with retries on what may pass (5xx, 429, 409, connection errors)."""
        from keystoneauth1 import exceptions as ks_exc
        from openstack import exceptions as os_exc

        delays = list(retries)
        while True:
            try:
                return fn()
            except os_exc.ResourceNotFound:
                raise
            except os_exc.HttpException as exc:
                status = getattr(exc, "status_code", None) or 0
                transient = status >= 500 or status in (409, 429) or status == 0
                quota = status == 403 and "quota" in str(exc).lower()
                if not transient or not delays:
                    raise DriverError(
                        f"{what}: {_short(exc)}", retryable=transient or quota
                    ) from exc
            except (
                ks_exc.ConnectFailure,
                ks_exc.ConnectTimeout,
                ks_exc.RetriableConnectionFailure,
                ks_exc.DiscoveryFailure,
                ks_exc.EndpointNotFound,
                os_exc.SDKException,
            ) as exc:
                if not delays:
                    raise DriverError(f"{what}: {_short(exc)}", retryable=True) from exc
            self.sleep(delays.pop(0))

    # -- flavors and images ---------------------------------------------------------------

    def _flavors(self) -> list[Any]:
        key = self._connection_key()
        cached = _FLAVORS.get(key)
        if cached and time.monotonic() - cached[0] < FLAVOR_CACHE_SECONDS:
            return cached[1]
        flavors = self._call("list flavors", lambda: list(self.conn.compute.flavors()))
        _FLAVORS[key] = (time.monotonic(), flavors)
        return flavors

    def flavor_for(self, *, cores: int, memory_gb: float) -> Any:
        """The fixed flavor, or the smallest that fits one node's share of the run."""
        flavors = self._flavors()
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

    def _image_id(self, spec: RunSpec) -> str:
        ref = spec.image or self.settings["image"]
        if not ref:
            raise DriverError(
                "no VM image: the study needs a ready VM image for this backend (compose one "
                "from packages, or register a Glance image), or set settings.image"
            )
        image = self._call(
            "find image", lambda: self.conn.image.find_image(ref, ignore_missing=True)
        )
        if image is None:
            raise DriverError(f"no image {ref!r} in the cloud's image service")
        return image.id

    def _network_args(self) -> dict[str, Any]:
        if self.settings["network"] == "none":
            return {"networks": "none"}
        network = self._call(
            "find network",
            lambda: self.conn.network.find_network(self.settings["network"], ignore_missing=True),
        )
        if network is None:
            raise DriverError(f"no network {self.settings['network']!r}")
        return {"networks": [{"uuid": network.id}]}

    # -- Driver ---------------------------------------------------------------------------

    def vm_work_dir(self, spec: RunSpec) -> str:
        return f"{self.settings['vm_work_root']}/{spec.run_id}/attempt-{spec.attempt}"

    def server_name(self, spec: RunSpec) -> str:
        # unique per start: a lost create answer is found by the leak reaper (metadata),
        # never reused by a later start
        return f"wt-{spec.run_id}-a{spec.attempt}-{secrets.token_hex(3)}"

    def prepare(self, spec: RunSpec) -> None:
        if spec.nodes > max(self.max_nodes, 1):
            raise DriverError(
                f"the run needs {spec.nodes} nodes; this backend allows {self.max_nodes}"
            )

    def start(self, spec: RunSpec) -> str:
        if spec.nodes > 1:
            from orchestration.drivers.openstack_heat import start_stack

            return start_stack(self, spec)
        per_node = spec.processes
        flavor = self.flavor_for(cores=per_node, memory_gb=spec.memory_gb)
        image_id = self._image_id(spec)
        name = self.server_name(spec)
        data = user_data(spec, work_dir=self.vm_work_dir(spec), python=self.settings["vm_python"])
        args: dict[str, Any] = {
            "name": name,
            "image_id": image_id,
            "flavor_id": flavor.id,
            "user_data": _b64(data),
            "metadata": {META_RUN: spec.run_id, META_ATTEMPT: str(spec.attempt), META_KIND: "run"},
            **self._network_args(),
        }
        if self.settings["key_name"]:
            args["key_name"] = self.settings["key_name"]
        if self.settings["security_groups"]:
            args["security_groups"] = [{"name": g} for g in self.settings["security_groups"]]
        if self.settings["availability_zone"]:
            args["availability_zone"] = self.settings["availability_zone"]
        server = self._call(
            "create server", lambda: self.conn.compute.create_server(**args), retries=()
        )
        return f"server:{server.id}"

    def poll(self, handle: str) -> RunStatus:
        kind, _, ident = handle.partition(":")
        if kind == "stack":
            from orchestration.drivers.openstack_heat import poll_stack

            return poll_stack(self, ident)
        if kind != "server" or not ident:
            return RunStatus(phase=RunPhase.UNKNOWN, reason="not an OpenStack handle")
        from openstack import exceptions as os_exc

        try:
            server = self._call("get server", lambda: self.conn.compute.get_server(ident))
        except os_exc.ResourceNotFound:
            if handle in _RELEASED:  # we deleted it: the agent with it
                return RunStatus(phase=RunPhase.EXITED, reason="server deleted by the portal")
            return RunStatus(phase=RunPhase.UNKNOWN, reason="the server is gone")
        if handle in _RELEASED:
            return RunStatus(phase=RunPhase.EXITED, reason="server being deleted")
        return self.server_status(server)

    def server_status(self, server: Any) -> RunStatus:
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
        created = _created_at(server)
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

    def cancel(self, handle: str, *, grace: float = 10.0) -> None:
        self.release(handle)

    def collect(self, handle: str) -> None:
        self.release(handle)

    def release(self, handle: str) -> None:
        """Delete what the handle holds (a server, or a Heat stack); gone already is fine."""
        kind, _, ident = handle.partition(":")
        if kind == "stack":
            from orchestration.drivers.openstack_heat import delete_stack

            delete_stack(self, ident)
            return
        if kind != "server" or not ident:
            return
        self._call(
            "delete server",
            lambda: self.conn.compute.delete_server(ident, ignore_missing=True, force=False),
        )
        _RELEASED[handle] = None
        while len(_RELEASED) > 10_000:  # remembered for poll() in this process, bounded
            _RELEASED.pop(next(iter(_RELEASED)))

    def capabilities(self) -> Capabilities:
        return Capabilities(
            kind="openstack",
            cores=self.cores,
            memory_gb=self.memory_gb,
            max_nodes=self.max_nodes,
            mpi=True,
            remote=True,
        )

    # -- limits, leaks --------------------------------------------------------------------

    def cloud_limits(self) -> CloudLimits:
        absolute = self._call("read limits", lambda: self.conn.compute.get_limits()).absolute

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

    def _servers(self, filters: Mapping[str, Any] | None = None) -> list[Any]:
        return self._call(
            "list servers", lambda: list(self.conn.compute.servers(**dict(filters or {})))
        )

    def portal_servers(self) -> list[Any]:
        """Every server of this project that a portal made itself: run servers and image
        builders (servers of a Heat stack belong to their stack, see openstack_heat)."""
        return [
            s
            for s in self._servers({"name": "^wt-"})
            if (getattr(s, "metadata", None) or {}).get(META_KIND) in ("run", "builder")
        ]

    def reap_leaks(
        self, *, tracked: set[tuple[str, int]], builders: set[str] = frozenset()
    ) -> list[str]:
        """Delete run servers whose (run, attempt) the portal does not track, once older than
        leak_grace (a server being created has no handle stored yet); names of the deleted."""
        deleted = []
        now = self.clock()
        for server in self.portal_servers():
            meta = getattr(server, "metadata", None) or {}
            if meta.get("windtunnel_stack"):
                continue  # a stack's server: its stack is reaped whole (openstack_heat)
            if meta.get(META_KIND) == "builder":
                if server.id in builders:
                    continue
            else:
                try:
                    key = (str(meta.get(META_RUN)), int(meta.get(META_ATTEMPT, 0)))
                except ValueError:
                    key = ("", 0)
                if key in tracked:
                    continue
            created = _created_at(server)
            if created is not None and now - created < self.settings["leak_grace"]:
                continue
            self._call(
                "delete leaked server",
                lambda s=server: self.conn.compute.delete_server(s.id, ignore_missing=True),
            )
            deleted.append(server.name)
        return deleted

    def check(self) -> dict[str, Any]:
        """What an admin sees when registering the backend: can we log in, what is there."""
        limits = self.cloud_limits()
        flavors = self._flavors()
        return {
            "ok": True,
            "capacity": {"cores": self.cores, "memory_gb": self.memory_gb, "nodes": self.max_nodes},
            "project_limits": limits.to_dict(),
            "flavors": sorted(f.name for f in flavors),
            "network": self.settings["network"],
        }


def _b64(text: str) -> str:
    import base64

    return base64.b64encode(text.encode()).decode()


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:500]
