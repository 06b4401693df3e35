"""Runs' cgroups (orchestration/agent/cgroups.py) on both kinds of host: this one (a hybrid:
v1 memory, cpu and pids controllers, a v2 hierarchy without controllers) for real, and a
pure v2 host's files (memory.max, cpu.max, pids.max) laid out as its kernel shows them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestration.agent.cgroups import (
    CgroupError,
    Hierarchy,
    RunCgroup,
    find_hierarchies,
    limits_problem,
    write_limits,
)

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="making cgroups takes root")

PURE_V2_MOUNTINFO = (
    "24 29 0:22 / /sys rw,nosuid - sysfs sysfs rw\n"
    "25 24 0:23 / {mount} rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n"
)


def test_a_pure_v2_host_gives_every_controller_from_one_hierarchy_beside_the_agent(
    tmp_path: Path,
) -> None:
    """v2 lets a group hold processes or child groups with controllers, not both: runs'
    groups go beside the agent's own, under a parent that hands the controllers down."""
    mount = tmp_path / "cgroup"
    service = mount / "system.slice" / "windtunnel.service"
    service.mkdir(parents=True)
    (service / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (mount / "system.slice" / "cgroup.subtree_control").write_text("cpu io memory pids\n")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(PURE_V2_MOUNTINFO.format(mount=mount))
    own = tmp_path / "cgroup-of-self"
    own.write_text("0::/system.slice/windtunnel.service\n")
    (found,) = find_hierarchies(mountinfo=str(mountinfo), cgroup=str(own))
    assert found.version == 2 and found.controllers == ("memory", "cpu", "pids")
    assert found.parent_dir() == str(mount / "system.slice" / "windtunnel")
    delegated = found.parent_dir("/system.slice/windtunnel.service/runs")
    assert delegated == str(service / "runs" / "windtunnel")


def test_a_hybrid_host_takes_each_controller_from_its_own_v1_hierarchy() -> None:
    found = find_hierarchies()
    controllers = sorted(c for h in found for c in h.controllers)
    if not os.path.isdir("/sys/fs/cgroup/memory"):
        pytest.skip("not a v1 or hybrid host")
    assert controllers == ["cpu", "memory", "pids"]
    assert all(h.version == 1 for h in found)


def test_v2_limits_are_written_as_its_files_say(tmp_path: Path) -> None:
    group = tmp_path / "run"
    group.mkdir()
    for name in ("memory.max", "memory.swap.max", "cpu.max", "pids.max"):
        (group / name).write_text("max\n")
    h = Hierarchy(
        version=2, mount=str(tmp_path), current="/", controllers=("memory", "cpu", "pids")
    )
    write_limits(h, str(group), memory_bytes=2 * 1024**3, cpus=1.5, processes=64)
    assert (group / "memory.max").read_text() == str(2 * 1024**3)
    assert (group / "memory.swap.max").read_text() == "0"  # no swap past the limit
    assert (group / "cpu.max").read_text() == "160000 100000"  # and a tenth for the agent
    assert (group / "pids.max").read_text() == "64"


@as_root
def test_an_agent_in_a_v2_group_starts_steps_in_it_and_kills_them_not_itself() -> None:
    """The v2 mechanics on this host's unified hierarchy (it has no controllers here, so
    no limits: joining, listing, killing and removing are the same everywhere): the agent
    enters the run's group, its step is in it, the group's leftovers are killed but not the
    agent, which leaves, and the group goes."""
    mount = "/sys/fs/cgroup/unified"
    if not os.path.ismount(mount):
        pytest.skip("no cgroup v2 hierarchy here")
    own = next(
        line.split(":", 2)[2]
        for line in Path("/proc/self/cgroup").read_text().splitlines()
        if line.startswith("0::")
    )
    h = Hierarchy(version=2, mount=mount, current=own, controllers=())
    group = RunCgroup.create(
        "run-test-v2", memory_bytes=0, cpus=0, processes=0, hierarchies=[h], require=()
    )
    path = group.dirs[0][1]
    script = (
        "import os, subprocess, sys\n"
        "from orchestration.agent.cgroups import Hierarchy, RunCgroup\n"
        "h = Hierarchy(version=2, mount=sys.argv[1], current=sys.argv[2], controllers=())\n"
        "g = RunCgroup([(h, sys.argv[3])], memory_bytes=0)\n"
        "g.enter()\n"
        "p = subprocess.Popen(['sleep', '60'])\n"
        "print(p.pid, flush=True)\n"
        "inside = open(sys.argv[3] + '/cgroup.procs').read().split()\n"
        "assert str(p.pid) in inside and str(os.getpid()) in inside, inside\n"
        "g.kill_all(reap=p.poll)\n"
        "assert p.wait(timeout=10) == -9 and g.pids() == [os.getpid()]\n"
        "g.leave()\n"
        "assert g.pids() == []\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", script, mount, own, path],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
        assert done.returncode == 0, done.stderr  # the agent's side, in a process of its own
    finally:
        group.remove()
    assert not os.path.exists(path)


@as_root
def test_no_memory_controller_means_no_group_and_the_reason() -> None:
    with pytest.raises(CgroupError, match="memory controller"):
        RunCgroup.create("run-x", memory_bytes=1, cpus=1, processes=1, hierarchies=[])
    assert limits_problem() == ""  # this host gives runs their cgroups
    assert "Not a directory" in limits_problem(parent="/cgroup.procs")
