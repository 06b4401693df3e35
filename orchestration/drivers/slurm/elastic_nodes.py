"""An elastic partition as the portal sees it: Slurm's state of each node (sinfo over the
driver's transport) beside its server's (the cloud), and the servers no node needs.

Slurm's node states carry power-saving suffixes: `~` powered down, `#` powering up, `%`
powering down, `!` power down pending, `*` not responding. A server whose node Slurm has
powered down, marked DOWN (a lost node, a failed boot) or no longer has is a leak: Slurm's
SuspendProgram or ResumeFailProgram normally deleted it already, the reaper is the backstop.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from orchestration.drivers.base import DriverError
from orchestration.drivers.openstack.timestamps import created_at
from orchestration.drivers.slurm.cluster import SlurmCluster
from orchestration.drivers.slurm.elastic import expand_hostlist, node_names
from orchestration.drivers.slurm.elastic_cloud import ElasticCloud, server_address

__all__ = [
    "REAP_GRACE_SECONDS",
    "elastic_nodes",
    "elastic_reap",
    "slurm_node_jobs",
    "slurm_node_states",
]

REAP_GRACE_SECONDS = 120.0  # a server younger than this may be a resume in progress


def slurm_node_states(
    cluster: SlurmCluster, elastic: Mapping[str, Any]
) -> dict[str, dict[str, str]]:
    """{node: {state, reason, cpus}} of the partition's nodes as sinfo lists them, `cpus`
    as sinfo's allocated/idle/other/total (DriverError when Slurm does not answer: nothing is
    decided blind)."""
    result = cluster.run(
        ["sinfo", "-h", "-N", "-p", elastic["partition"], "-o", "%N|%T|%C|%E"], retries=0
    )
    if not result.ok:
        raise DriverError(f"sinfo failed: {result.error_text()}", retryable=True)
    states: dict[str, dict[str, str]] = {}
    for line in result.stdout.splitlines():
        parts = line.strip().split("|", 3)
        if len(parts) == 4:
            reason = "" if parts[3] == "none" else parts[3]
            states[parts[0]] = {"state": parts[1], "reason": reason, "cpus": parts[2]}
    return states


def slurm_node_jobs(cluster: SlurmCluster, elastic: Mapping[str, Any]) -> dict[str, list[str]]:
    """{node: [job ids]} of the jobs running on the partition's nodes (array tasks as
    `<job>_<task>`, as the driver's run handles name them)."""
    result = cluster.run(
        ["squeue", "-h", "-p", elastic["partition"], "-t", "CF,R,CG", "-o", "%i|%N"], retries=0
    )
    if not result.ok:
        raise DriverError(f"squeue failed: {result.error_text()}", retryable=True)
    jobs: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        job, _, nodes = line.strip().partition("|")
        if job and nodes:
            for node in expand_hostlist(nodes):
                jobs.setdefault(node, []).append(job)
    return jobs


def _utilisation(cpus: str) -> float | None:
    """Allocated ÷ total CPUs of sinfo's `A/I/O/T`, or None."""
    try:
        allocated, _, _, total = (int(x) for x in cpus.split("/"))
    except ValueError:
        return None
    return round(allocated / total, 3) if total else None


def _unwanted(state: str) -> bool:
    """Whether a node in this Slurm state needs no server."""
    if "#" in state:  # powering up: the resume is making its server
        return False
    return state.endswith("~") or state.startswith("down") or state == "drained"


def elastic_nodes(cluster: SlurmCluster, elastic: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each node of the partition: Slurm's state and reason, the jobs on it and the share of
    its CPUs they hold (utilisation), its server's name, status, image, address and uptime
    (seconds since the server was made)."""
    states = slurm_node_states(cluster, elastic)
    jobs = slurm_node_jobs(cluster, elastic)
    servers = ElasticCloud(elastic).node_servers()
    now = time.time()
    rows = []
    for node in node_names(elastic):
        slurm = states.get(node, {"state": "unknown (hidden: add PrivateData=cloud)", "reason": ""})
        server = servers.get(node)
        created = created_at(server) if server is not None else None
        rows.append(
            {
                "node": node,
                "slurm_state": slurm["state"],
                "reason": slurm["reason"],
                "failed_boot": "failed boot" in slurm["reason"]
                or "ResumeTimeout" in slurm["reason"],
                "server": getattr(server, "name", "") if server is not None else "",
                "server_status": str(getattr(server, "status", "") or "") if server else "",
                "address": server_address(server) if server is not None else "",
                "uptime_seconds": round(now - created) if created else None,
                "image": elastic["image"] if server is not None else "",
                "jobs": jobs.get(node, []),
                "utilisation": _utilisation(slurm.get("cpus", "")),
            }
        )
    return rows


def elastic_reap(
    cluster: SlurmCluster, elastic: Mapping[str, Any], *, grace: float = REAP_GRACE_SECONDS
) -> list[str]:
    """Delete the servers of nodes that Slurm has powered down, marked DOWN or does not know,
    once older than `grace`; the names deleted."""
    states = slurm_node_states(cluster, elastic)
    cloud = ElasticCloud(elastic)
    now = time.time()
    deleted = []
    for node, server in cloud.node_servers().items():
        state = states.get(node, {}).get("state")
        if state is not None and not _unwanted(state):
            continue
        created = created_at(server)
        if created is not None and now - created < grace:
            continue
        cloud.delete_server(server.id, what=f"delete server of {node} ({state or 'no such node'})")
        deleted.append(server.name)
    return deleted
