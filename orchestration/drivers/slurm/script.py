"""The batch script of one run, or of one job array of same-shape runs, and its #SBATCH lines.

Scripts are built only from validated settings and paths the driver made itself, every word
quoted with `shlex.quote`; run parameters never reach a shell (they travel in run.json, which
only the agent reads).
"""

from __future__ import annotations

import math
import posixpath
import shlex
from collections.abc import Sequence

from orchestration.drivers.base import DriverError, RunSpec
from orchestration.drivers.slurm.settings import SAFE_PATH, SlurmSettings

__all__ = ["batch_script", "common_dir", "job_shape", "sbatch_directives"]


def job_shape(spec: RunSpec) -> tuple[int, int, int]:
    """(tasks, nodes, memory in MB per node) of a run: runs of one shape share a job array."""
    nodes = max(1, spec.nodes)
    mem_mb = max(1, math.ceil(spec.memory_gb * 1024 / nodes))
    return (spec.processes, nodes, mem_mb)


def common_dir(run_dirs: Sequence[str]) -> str:
    """The directory an array's runs share (a single run's own directory)."""
    return posixpath.commonpath(run_dirs) if len(run_dirs) > 1 else run_dirs[0]


def sbatch_directives(
    settings: SlurmSettings, spec: RunSpec, *, name: str, output: str, chdir: str
) -> list[str]:
    """The sbatch options of a job: the run's resources, then the backend's settings."""
    s = settings
    processes, nodes, mem_mb = job_shape(spec)
    lines = [
        f"--job-name={name}",
        f"--ntasks={processes}",
        f"--nodes={nodes}",
        f"--mem={mem_mb}M",
        f"--output={output}",
        f"--chdir={chdir}",
        "--no-requeue",  # the portal requeues, as a new attempt (fenced)
        "--export=ALL",
    ]
    if s["time_limit"]:
        lines.append(f"--time={s['time_limit']}")
    for key, value in (("partition", s["partition"]), ("account", s["account"]), ("qos", s["qos"])):
        if value:
            lines.append(f"--{key}={value}")
    lines.extend(s["extra_directives"])
    return lines


def batch_script(
    settings: SlurmSettings,
    batch: Sequence[RunSpec],
    run_dirs: Sequence[str],
    *,
    python: str,
    pythonpath: str,
) -> str:
    """The batch script for one run or one array of same-shape runs (`run_dirs[i]` is the
    cluster directory of `batch[i]`); `python` runs the agent with `pythonpath` in front."""
    s = settings
    common = common_dir(run_dirs)
    if len(batch) == 1:
        spec = batch[0]
        name = f"{s['job_name_prefix']}-{spec.run_id[:8]}-{spec.attempt}"
        output = posixpath.join(run_dirs[0], "slurm-%j.out")
    else:
        name = f"{s['job_name_prefix']}-array"
        output = posixpath.join(common, "slurm-logs", "%A_%a.out")
    for path in (output, common):
        if not SAFE_PATH.match(path):
            raise DriverError(f"unsafe path {path!r}")
    directives = sbatch_directives(s, batch[0], name=name, output=output, chdir=common)
    if len(batch) > 1:
        directives.append(f"--array=0-{len(batch) - 1}")
    q = shlex.quote
    lines = ["#!/bin/bash"]
    lines += [f"#SBATCH {d}" for d in directives]
    lines += [
        "# Windtunnel: starts the run agent, which reports to the portal over HTTP.",
        "set -o pipefail",
    ]
    for key, value in s["env"].items():
        lines.append(f"export {key}={q(value)}")
    if s["slurm_conf"]:
        lines.append(f"export SLURM_CONF={q(s['slurm_conf'])}")
    if pythonpath:
        lines.append(f'export PYTHONPATH={q(pythonpath)}"${{PYTHONPATH:+:$PYTHONPATH}}"')
    lines += [
        "export PYTHONUNBUFFERED=1",
        'if [ "$EUID" = 0 ]; then',  # bash's own variables: no process to start
        "  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
        "fi",
    ]
    if s["modules"]:
        lines += [
            "if ! type module >/dev/null 2>&1; then",
            "  for f in /etc/profile.d/modules.sh /etc/profile.d/lmod.sh "
            "/usr/share/lmod/lmod/init/bash; do",
            '    if [ -r "$f" ]; then . "$f"; break; fi',
            "  done",
            "fi",
        ]
        lines += [f"module load {q(m)} || exit 97" for m in s["modules"]]
    if len(batch) == 1:
        lines.append(f"RUN_DIR={q(run_dirs[0])}")
    else:
        lines.append("RUN_DIRS=(")
        lines += [f"  {q(d)}" for d in run_dirs]
        lines.append(")")
        lines.append('RUN_DIR="${RUN_DIRS[$SLURM_ARRAY_TASK_ID]}"')
    lines += [
        'cd "$RUN_DIR" || exit 98',
        'exec >>"$RUN_DIR/agent.log" 2>&1',
        'echo "== slurm job ${SLURM_JOB_ID}${SLURM_ARRAY_TASK_ID:+ (array task '
        '$SLURM_ARRAY_JOB_ID"_"$SLURM_ARRAY_TASK_ID)} on ${SLURMD_NODENAME:-$HOSTNAME} =="',
        # exec: the agent is the batch shell, so `scancel --batch --signal=TERM` reaches it
        f"exec {q(python)} -m orchestration.agent run.json",
    ]
    return "\n".join(lines) + "\n"
