"""The cloud side of an elastic Slurm partition: the servers that play its nodes.

Each node's server is named `wt-<cluster_tag>-<node>` and carries `windtunnel_kind=elastic`,
`windtunnel_node` and `windtunnel_cluster` in its metadata: the power programs find a
node's server by them, the Slurm backend's leak reaper deletes the servers of nodes Slurm no
longer runs, and the OpenStack backend's reaper (run servers and builders only) leaves them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from orchestration.drivers.base import DriverError, SettingsError
from orchestration.drivers.openstack.boot import b64
from orchestration.drivers.openstack.servers import META_KIND, ServerClient
from orchestration.drivers.openstack.settings import validate_settings as openstack_settings
from orchestration.drivers.slurm.elastic import (
    META_CLUSTER,
    META_KIND_ELASTIC,
    META_NODE,
    server_name,
    user_data,
)

__all__ = ["ElasticCloud", "check_elastic", "server_address"]


def server_address(server: Any) -> str:
    """The server's first fixed IPv4 address, or ""."""
    for entries in (getattr(server, "addresses", None) or {}).values():
        for entry in entries or []:
            if entry.get("version", 4) == 4 and entry.get("addr"):
                return str(entry["addr"])
    return ""


class ElasticCloud(ServerClient):
    """The project an elastic partition's nodes live in, reached by its clouds.yaml entry."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)
        super().__init__(
            openstack_settings(
                {
                    "cloud": config["cloud"],
                    "clouds_yaml": config.get("clouds_yaml") or "",
                    "flavor": config["flavor"],
                    "image": config["image"],
                    "network": config["network"],
                    "security_groups": config.get("security_groups") or [],
                    "key_name": config.get("key_name") or "",
                }
            ),
            {},
        )

    def flavor(self) -> Any:
        for f in self.flavors():
            if self.config["flavor"] in (f.name, f.id):
                return f
        raise DriverError(f"no flavor {self.config['flavor']!r} in this cloud")

    def node_servers(self) -> dict[str, Any]:
        """This partition's servers by the node they play."""
        prefix = f"^wt-{self.config['cluster_tag']}-"
        out: dict[str, Any] = {}
        for s in self.list_servers({"name": prefix}):
            meta = getattr(s, "metadata", None) or {}
            if (
                meta.get(META_KIND) == META_KIND_ELASTIC
                and meta.get(META_CLUSTER) == self.config["cluster_tag"]
                and meta.get(META_NODE)
            ):
                out[meta[META_NODE]] = s
        return out

    def create_nodes(self, nodes: Iterable[str]) -> dict[str, Any]:
        """Create a server for each node that has none (a retried resume finds its server
        by metadata instead of making a second one); the servers by node."""
        existing = self.node_servers()
        image = self.find_image(self.config["image"])
        if image is None:
            raise DriverError(f"no image {self.config['image']!r} in the cloud's image service")
        flavor = self.flavor()
        made: dict[str, Any] = {}
        for node in nodes:
            if node in existing and str(existing[node].status).upper() != "ERROR":
                made[node] = existing[node]
                continue
            if node in existing:
                self.delete_server(existing[node].id, what="delete failed node server")
            args: dict[str, Any] = {
                "name": server_name(self.config, node),
                "image_id": image.id,
                "flavor_id": flavor.id,
                "metadata": {
                    META_KIND: META_KIND_ELASTIC,
                    META_NODE: node,
                    META_CLUSTER: self.config["cluster_tag"],
                },
                "user_data": b64(user_data(self.config, node)),
                **self.network_args(),
            }
            if self.config.get("key_name"):
                args["key_name"] = self.config["key_name"]
            if self.config.get("security_groups"):
                args["security_groups"] = [{"name": g} for g in self.config["security_groups"]]
            made[node] = self.create_server(args)
        return made

    def wait_addresses(self, nodes: Iterable[str], *, timeout: float) -> dict[str, str]:
        """Wait until each node's server is ACTIVE with an address; {node: address} for
        those that are, DriverError naming a server that went to ERROR."""
        wanted = set(nodes)
        found: dict[str, str] = {}
        deadline = time.monotonic() + timeout
        while wanted - set(found):
            servers = self.node_servers()
            for node in wanted - set(found):
                s = servers.get(node)
                status = str(getattr(s, "status", "") or "").upper()
                if status == "ERROR":
                    fault = getattr(s, "fault", None) or {}
                    raise DriverError(f"server of {node} went to ERROR: {fault.get('message')}")
                if status == "ACTIVE" and server_address(s):
                    found[node] = server_address(s)
            if wanted - set(found) and time.monotonic() > deadline:
                break
            if wanted - set(found):
                time.sleep(1.0)
        return found

    def delete_nodes(self, nodes: Iterable[str]) -> list[str]:
        """Delete the servers of `nodes` (gone already is fine); the names deleted."""
        servers = self.node_servers()
        deleted = []
        for node in nodes:
            if node in servers:
                self.delete_server(servers[node].id, what=f"delete server of {node}")
                deleted.append(servers[node].name)
        return deleted


def check_elastic(elastic: Mapping[str, Any]) -> dict[str, Any]:
    """The elastic partition's settings checked against its cloud: the flavor and image
    exist, and the node count fits the project's limits (instances, cores, RAM).
    SettingsError names the field; the flavor's size is returned ({cpus, memory_mb})."""
    cloud = ElasticCloud(elastic)
    try:
        flavors = cloud.flavors()
    except DriverError as exc:
        raise SettingsError("elastic.cloud", f"cannot reach the cloud: {exc}") from exc
    flavor = next((f for f in flavors if elastic["flavor"] in (f.name, f.id)), None)
    if flavor is None:
        names = ", ".join(sorted(f.name for f in flavors))
        raise SettingsError("elastic.flavor", f"no flavor {elastic['flavor']!r}; known: {names}")
    if cloud.find_image(elastic["image"]) is None:
        raise SettingsError("elastic.image", f"no image {elastic['image']!r} in the cloud")
    try:
        cloud.network_args()
    except DriverError as exc:
        raise SettingsError("elastic.network", str(exc)) from exc
    limits = _limits(cloud)
    n = elastic["nodes"]
    for what, per_node, limit in (
        ("instances", 1, limits.get("instances")),
        ("cores", flavor.vcpus, limits.get("cores")),
        ("RAM (MB)", flavor.ram, limits.get("ram")),
    ):
        if limit is not None and n * per_node > limit:
            raise SettingsError(
                "elastic.nodes",
                f"{n} nodes of {flavor.name} need {n * per_node} {what}; the project's limit "
                f"is {limit}",
            )
    return {"cpus": int(flavor.vcpus), "memory_mb": int(flavor.ram)}


def _limits(cloud: ElasticCloud) -> dict[str, int | None]:
    absolute = cloud.call("read limits", lambda: cloud.conn.compute.get_limits()).absolute

    def limit(value: Any) -> int | None:
        return None if value is None or int(value) < 0 else int(value)

    return {
        "instances": limit(absolute.instances),
        "cores": limit(absolute.total_cores),
        "ram": limit(absolute.total_ram),
    }
