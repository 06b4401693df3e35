"""What a run's server does when it boots: write run.json, start the agent.

User data is built from checked settings and values the portal made itself; run.json sits
in a quoted here-document, so nothing in it is ever expanded by a shell.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from orchestration.drivers.base import DriverError, RunSpec

__all__ = ["b64", "pilot_user_data", "user_data", "vm_run_json"]


def vm_run_json(spec: RunSpec, *, work_dir: str) -> dict[str, Any]:
    """run.json for an agent on a VM: its own work dir, the case downloaded from the portal,
    and a longer window for the final reports (a cloud network may be slower to reach)."""
    data: dict[str, Any] = json.loads(spec.to_json(sandbox="uid"))  # the VM is the run's own
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


def pilot_user_data(config: dict[str, Any], *, work_root: str, python: str) -> str:
    """A pool worker's boot script: write pilot.json, start the pilot (docs/pools.md), which
    registers with the portal and runs the agent for each run it leases."""
    body = json.dumps(config, separators=(",", ":"))
    if "\n" in body:
        raise DriverError("pilot.json must fit on one line")
    return (
        "#!/bin/sh\n"
        f"# Windtunnel pool {config['pool']} worker {config['worker_id']} (written by the portal)\n"
        "set -eu\n"
        "umask 077\n"
        f"W='{work_root}/pilot-{config['worker_id']}'\n"
        'mkdir -p "$W"\n'
        "cat > \"$W/pilot.json\" <<'WINDTUNNEL_PILOT_JSON'\n"
        f"{body}\n"
        "WINDTUNNEL_PILOT_JSON\n"
        "if [ -r /etc/windtunnel/env ]; then set -a; . /etc/windtunnel/env; set +a; fi\n"
        'cd "$W"\n'
        f'exec {python} -m orchestration.agent.pilot "$W/pilot.json" >> "$W/pilot.log" 2>&1\n'
    )


def b64(text: str) -> str:
    """`text` as base64, as Nova takes user data."""
    return base64.b64encode(text.encode()).decode()
