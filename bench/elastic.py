"""elastic_resume_ratio: how long a job waits for a cloud node Slurm powers up, against the
boot itself — pending → running on the test cluster's elastic partition, ÷ the boot delay
the harness injects before it plays the node's boot (BootPlayer: the server is ACTIVE in
the loopback Nova, then `boot_delay` seconds, then the node's slurmd starts).

1.0 would be a job that starts the moment its node has booted; what is above it is Windtunnel's
ResumeProgram (create the server, wait for ACTIVE and an address, scontrol update) plus
Slurm's own detection of the registered node (slurmctld notices a powered-up node's
registration on its periodic pass). Target ≤ 1.5 with the default 20 s boot.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time

from bench.common import ROOT, emit, progress, sized, started

BOOT_DELAY = float(os.environ.get("WT_ELASTIC_BOOT_DELAY", sized(20, 5)))
SAMPLES = sized(3, 1)


def _slurm(conf: str, *argv: str) -> str:
    env = {**os.environ, "SLURM_CONF": conf}
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout


def _wait(what: str, check, timeout: float):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def _free_node(conf: str) -> str:
    def pick():
        for line in _slurm(conf, "scontrol", "-o", "show", "node").splitlines():
            name = line.split()[0].removeprefix("NodeName=")
            state = line.split("State=")[1].split()[0]
            if name.startswith("elastic-") and state == "IDLE+CLOUD+POWERED_DOWN":
                return name
        return None

    return _wait("a powered-down elastic node", pick, 300)


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from orchestration.drivers.slurm.elastic_testing import BootPlayer

    # WT_OPENSTACK_DIR: a control plane of another checkout's start-openstack, already running
    cloud = contextlib.nullcontext() if os.environ.get("WT_OPENSTACK_DIR") else started("openstack")
    with cloud, started("slurm"):
        facts = json.loads((ROOT / ".data/slurm/cluster.json").read_text())
        if not facts.get("elastic"):
            raise SystemExit("the test cluster has no elastic partition (scripts/start-slurm)")
        conf = facts["slurm_conf"]
        samples = []
        with BootPlayer(elastic_dir=str(ROOT / ".data/slurm/elastic"), boot_delay=BOOT_DELAY):
            for i in range(SAMPLES):
                node = _free_node(conf)
                t0 = time.monotonic()
                job = _slurm(
                    conf,
                    "sbatch",
                    "--parsable",
                    "-o",
                    "/dev/null",
                    "-p",
                    "elastic",
                    "-w",
                    node,
                    "--wrap",
                    "sleep 2",
                ).strip()

                def running(job=job):
                    state = _slurm(conf, "squeue", "-h", "-j", job, "-o", "%T").strip()
                    return state in ("RUNNING", "COMPLETING", "") or None

                _wait(f"job {job} to run", running, BOOT_DELAY + 300)
                seconds = time.monotonic() - t0
                samples.append({"node": node, "seconds": round(seconds, 2)})
                progress(f"sample {i + 1}/{SAMPLES}: {node} pending → running in {seconds:.1f} s")
                # let Slurm power it down again before the next sample (SuspendTime 10 s)
                _wait(
                    f"{node} powered down",
                    lambda node=node: (
                        _slurm(conf, "sinfo", "-h", "-N", "-n", node, "-o", "%T")
                        .strip()
                        .endswith("~")
                    ),
                    300,
                )
        median = statistics.median(s["seconds"] for s in samples)
        ratio = median / BOOT_DELAY
        emit(
            "elastic_resume_ratio",
            round(ratio, 3),
            "x",
            f"pending→running {median:.1f} s ÷ {BOOT_DELAY:g} s injected boot, median of "
            f"{SAMPLES}, elastic partition of the test cluster",
            boot_delay=BOOT_DELAY,
            samples=samples,
        )


if __name__ == "__main__":
    main()
