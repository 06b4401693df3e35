"""The programs Slurm's power saving runs for an elastic partition (on the controller, as
SlurmUser):

    python -m orchestration.drivers.slurm.power resume      --config elastic.json elastic-[1-2]
    python -m orchestration.drivers.slurm.power suspend     --config elastic.json elastic-3
    python -m orchestration.drivers.slurm.power resume-fail --config elastic.json elastic-1

`resume` creates a server per node (openstacksdk, the cloud by its clouds.yaml entry), waits
until each is ACTIVE with an address and tells Slurm where the node is (`scontrol update
nodename=… nodeaddr=…`); the server's cloud-init starts slurmd, which registers, and Slurm
starts the job. A server that cannot be made marks its node DOWN with the reason. `suspend`
deletes the servers of nodes Slurm powers down; `resume-fail` (a node that did not register
within ResumeTimeout: a failed boot) deletes them too and says so in the node's reason.
Slurm decides when; these only do what they are told.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from orchestration.drivers.base import DriverError
from orchestration.drivers.slurm.elastic import expand_hostlist
from orchestration.drivers.slurm.elastic_cloud import ElasticCloud

__all__ = ["main", "resume", "resume_fail", "scontrol_update", "suspend"]

log = logging.getLogger("windtunnel.elastic")


def scontrol_update(config: Mapping[str, Any], node: str, **fields: str) -> None:
    """`scontrol update nodename=<node> key=value…`; failures are logged, not raised."""
    env = dict(os.environ)
    if config.get("slurm_conf"):
        env["SLURM_CONF"] = config["slurm_conf"]
    argv = ["scontrol", "update", f"nodename={node}", *(f"{k}={v}" for k, v in fields.items())]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode:
        log.warning("%s: %s", " ".join(argv), done.stderr.strip())


def resume(config: Mapping[str, Any], nodes: Sequence[str]) -> dict[str, str]:
    """Servers for `nodes`, and their addresses given to Slurm; {node: address}."""
    log.info("resume %s", ",".join(nodes))
    cloud = ElasticCloud(config)
    try:
        cloud.create_nodes(nodes)
        addresses = cloud.wait_addresses(nodes, timeout=float(config["resume_timeout"]))
    except DriverError as exc:
        log.error("resume %s: %s", ",".join(nodes), exc)
        for node in nodes:
            scontrol_update(config, node, state="DOWN", reason=f"elastic: {str(exc)[:200]}")
        return {}
    for node, address in addresses.items():
        log.info("resume %s: server at %s", node, address)
        scontrol_update(config, node, nodeaddr=address, nodehostname=node)
    for node in set(nodes) - set(addresses):  # Slurm's ResumeTimeout decides what follows
        log.warning("resume %s: no address yet", node)
    return addresses


def suspend(config: Mapping[str, Any], nodes: Sequence[str]) -> list[str]:
    """Delete the servers of `nodes`; their names."""
    deleted = ElasticCloud(config).delete_nodes(nodes)
    log.info("suspend %s: deleted %s", ",".join(nodes), ", ".join(deleted) or "nothing")
    return deleted


def resume_fail(config: Mapping[str, Any], nodes: Sequence[str]) -> list[str]:
    """Nodes that did not register within ResumeTimeout: a failed boot. Their servers are
    deleted and the node's reason says so (Slurm has set them DOWN)."""
    deleted = ElasticCloud(config).delete_nodes(nodes)
    for node in nodes:
        scontrol_update(
            config,
            node,
            state="DOWN",
            reason=f"failed boot: no slurmd within ResumeTimeout ({config['resume_timeout']} s)",
        )
    log.warning("resume-fail %s: deleted %s", ",".join(nodes), ", ".join(deleted) or "nothing")
    return deleted


ACTIONS = {"resume": resume, "suspend": suspend, "resume-fail": resume_fail}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestration.drivers.slurm.power")
    parser.add_argument("action", choices=sorted(ACTIONS))
    parser.add_argument("--config", required=True, help="the programs' JSON config file")
    parser.add_argument("hostlist", nargs="+", help="Slurm hostlist(s), e.g. elastic-[1-3]")
    args = parser.parse_args(argv)
    with open(args.config, encoding="utf-8") as fh:
        config = json.load(fh)
    handler: logging.Handler = (
        logging.FileHandler(config["log_file"])
        if config.get("log_file")
        else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        return _run(args.action, args.hostlist, config)
    finally:
        log.removeHandler(handler)
        handler.close()


def _run(action: str, hostlists: Sequence[str], config: Mapping[str, Any]) -> int:
    try:
        nodes = [n for h in hostlists for n in expand_hostlist(h)]
    except ValueError as exc:
        log.error("%s: %s", action, exc)
        return 2
    try:
        ACTIONS[action](config, nodes)
    except DriverError as exc:
        log.error("%s %s: %s", action, ",".join(nodes), exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
