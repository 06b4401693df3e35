"""The Slurm backend's elastic partition: settings, the rendered slurm.conf lines, the power
programs against the loopback OpenStack, and Slurm itself growing and shrinking the test
cluster's elastic partition (scripts/start-slurm) while the harness plays each node's boot
(elastic_testing.BootPlayer: a slurmd for the node once its server is ACTIVE)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from orchestration.drivers.base import SettingsError
from orchestration.drivers.slurm import elastic as el
from orchestration.drivers.slurm import validate_settings
from orchestration.tests.conftest import OpenStackCloud
from orchestration.tests.test_slurm_cluster import cluster, slurm_unavailable

pytestmark = pytest.mark.xdist_group("cluster")

GOOD = {
    "partition": "burst",
    "nodes": 4,
    "cloud": "windtunnel-tenant",
    "flavor": "wt.small",
    "image": "wt-base",
    "network": "wt-net",
}


# -- settings, hostlists and the rendered lines (no services) ------------------------------


@pytest.mark.parametrize(
    ("hostlist", "names"),
    [
        ("elastic-1", ["elastic-1"]),
        ("elastic-[1-3]", ["elastic-1", "elastic-2", "elastic-3"]),
        ("a-[1,3-4],b7", ["a-1", "a-3", "a-4", "b7"]),
        ("n[08-10]", ["n08", "n09", "n10"]),
        ("r[1-2]-c[1-2]", ["r1-c1", "r1-c2", "r2-c1", "r2-c2"]),
    ],
)
def test_hostlists_expand_as_scontrol_show_hostnames_does(hostlist: str, names: list[str]) -> None:
    assert el.expand_hostlist(hostlist) == names


@pytest.mark.parametrize("bad", ["a-[1-", "a-]1", "a-[3-1]", "a-[x]", "a b"])
def test_a_malformed_hostlist_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        el.expand_hostlist(bad)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"flavor": ""}, "elastic.flavor"),
        ({"image": None}, "elastic.image"),
        ({"nodes": 0}, "elastic.nodes"),
        ({"nodes": "4"}, "elastic.nodes"),
        ({"suspend_time": 2}, "elastic.suspend_time"),
        ({"resume_timeout": 10}, "elastic.resume_timeout"),
        ({"suspend_timeout": 1.5}, "elastic.suspend_timeout"),
        ({"partition": "Burst Nodes"}, "elastic.partition"),
        ({"password": "x"}, "elastic.password"),
        ({"shared_source": "nfs:/export/runs"}, "elastic.shared_path"),
    ],
)
def test_bad_elastic_settings_name_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(SettingsError) as err:
        el.validate_elastic({**GOOD, **change})
    assert err.value.field == field


def test_the_elastic_partition_must_be_one_runs_go_to() -> None:
    with pytest.raises(SettingsError) as err:
        validate_settings({"partition": "debug", "elastic": GOOD})
    assert err.value.field == "partition"
    ok = validate_settings({"partition": "debug,burst", "elastic": GOOD})
    assert ok["elastic"] is not None and ok["elastic"]["nodes"] == 4


def test_the_fragment_declares_cloud_nodes_of_the_flavor_and_the_power_programs() -> None:
    elastic = el.validate_elastic({**GOOD, "suspend_time": 300, "programs_dir": "/etc/wt"})
    text = el.render_fragment(elastic, cpus=2, memory_mb=2048)
    assert "ResumeProgram=/etc/wt/resume\n" in text
    assert "SuspendProgram=/etc/wt/suspend\n" in text
    assert "ResumeFailProgram=/etc/wt/resume-fail\n" in text
    assert "NodeName=burst-[1-4] State=CLOUD Feature=cloud CPUs=2 RealMemory=2048\n" in text
    assert (
        "PartitionName=burst Nodes=burst-[1-4] MaxTime=INFINITE State=UP SuspendTime=300 "
        "ResumeTimeout=900 SuspendTimeout=120\n"
    ) in text
    # the cloud by its clouds.yaml entry only: no credentials anywhere Slurm reads
    config = el.programs_config(elastic)
    assert config["cloud"] == "windtunnel-tenant"
    assert not {"password", "application_credential_secret"} & set(config)
    script = el.wrapper_script(elastic, "resume")
    assert "orchestration.drivers.slurm.power resume --config /etc/wt/elastic.json" in script
    assert "PrologSlurmctld=/etc/wt/prolog\n" in text


def test_the_prolog_waits_only_while_the_jobs_nodes_power_up(tmp_path: Path) -> None:
    """The PrologSlurmctld with stand-ins for sinfo and squeue: a job on nodes that are up
    passes at once; a job on a powering-up node waits until its node has registered."""
    elastic = el.validate_elastic({**GOOD, "resume_timeout": 60})
    prolog = tmp_path / "prolog"
    prolog.write_text(el.prolog_script(elastic))
    prolog.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    states = tmp_path / "states"  # what the stand-in sinfo answers, one line per look
    (bin_dir / "sinfo").write_text(
        f"#!/bin/sh\nhead -1 {states}; tail -n +2 {states} > {states}.n; mv {states}.n {states}\n"
    )
    (bin_dir / "squeue").write_text("#!/bin/sh\necho CONFIGURING\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "b-1"}

    states.write_text("allocated\n")
    subprocess.run([str(prolog)], env=env, check=True, timeout=30)
    assert states.read_text() == ""  # one look

    states.write_text("allocated#\nallocated#\nallocated#\nallocated\nnever read\n")
    subprocess.run([str(prolog)], env=env, check=True, timeout=30)
    assert states.read_text() == "never read\n"  # it looked until the node was up


def test_a_node_boots_into_slurmd_joining_the_controller_with_the_shared_directory() -> None:
    elastic = el.validate_elastic(
        {**GOOD, "controller": "ctl:6817", "shared_source": "nfs:/runs", "shared_path": "/runs"}
    )
    text = el.user_data(el.programs_config(elastic), "burst-2")
    assert text.startswith("#cloud-config\nhostname: burst-2\n")
    assert "mount -t nfs nfs:/runs /runs" in text
    assert "slurmd -N burst-2 --conf-server ctl:6817" in text


# -- the programs against the loopback OpenStack -------------------------------------------


def _config(tmp_path: Path, facts: dict[str, Any], **extra: Any) -> dict[str, Any]:
    elastic = el.validate_elastic(
        {
            **GOOD,
            "clouds_yaml": facts["clouds_yaml"],
            "cluster_tag": f"t{uuid.uuid4().hex[:6]}",
            **extra,
        }
    )
    return {**el.programs_config(elastic), "log_file": str(tmp_path / "power.log")}


def test_the_cloud_check_knows_flavors_images_and_the_project_limit(
    openstack_cloud: OpenStackCloud,
) -> None:
    from orchestration.drivers.slurm.elastic_cloud import check_elastic

    base = {**GOOD, "clouds_yaml": openstack_cloud.facts["clouds_yaml"]}
    assert check_elastic(el.validate_elastic(base)) == {"cpus": 1, "memory_mb": 1024}
    for change, field in (
        ({"flavor": "wt.huge"}, "elastic.flavor"),
        ({"image": "no-such-image"}, "elastic.image"),
        ({"network": "no-such-net"}, "elastic.network"),
        # the tenant may run 50 instances (scripts/openstack/setup.py BASE_QUOTAS)
        ({"nodes": 60}, "elastic.nodes"),
    ):
        with pytest.raises(SettingsError) as err:
            check_elastic(el.validate_elastic({**base, **change}))
        assert err.value.field == field, err.value


def test_resume_creates_tagged_servers_and_suspend_deletes_them(
    openstack_cloud: OpenStackCloud, tmp_path: Path
) -> None:
    from orchestration.drivers.slurm import power
    from orchestration.drivers.slurm.elastic_cloud import ElasticCloud

    config = _config(tmp_path, openstack_cloud.facts, partition="unit", resume_timeout=120)
    path = tmp_path / "elastic.json"
    path.write_text(json.dumps(config))
    cloud = ElasticCloud(config)
    try:
        # not nodes of any cluster: the scontrol update is refused and logged, nothing else
        assert power.main(["resume", "--config", str(path), "unit-[1-2]"]) == 0
        servers = cloud.node_servers()
        assert sorted(servers) == ["unit-1", "unit-2"]
        for node, server in servers.items():
            assert server.name == f"wt-{config['cluster_tag']}-{node}"
            assert server.metadata["windtunnel_kind"] == "elastic"
            assert server.metadata["windtunnel_node"] == node
        assert "resume unit-1: server at 10.77.0." in (tmp_path / "power.log").read_text()
        # a retried resume finds the servers instead of making more
        assert power.main(["resume", "--config", str(path), "unit-1"]) == 0
        assert len(cloud.list_servers({"name": f"^wt-{config['cluster_tag']}-"})) == 2
        assert power.main(["suspend", "--config", str(path), "unit-[1-2]"]) == 0
        deadline = time.monotonic() + 120
        while cloud.node_servers() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert cloud.node_servers() == {}
    finally:
        cloud.delete_nodes(["unit-1", "unit-2"])


# -- Slurm grows and shrinks the test cluster's elastic partition --------------------------


def _elastic_unavailable() -> str:
    if reason := slurm_unavailable():
        return reason
    if os.geteuid() != 0:
        return "playing a node's boot needs root (a slurmd, an address on lo)"
    if not cluster().get("elastic"):
        return "the test cluster has no elastic partition (scripts/start-slurm)"
    return ""


needs_elastic = pytest.mark.skipif(
    bool(_elastic_unavailable()), reason=_elastic_unavailable() or "-"
)


def slurm(*argv: str) -> str:
    env = {**os.environ, "SLURM_CONF": cluster()["slurm_conf"]}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def node_state(node: str) -> tuple[str, str]:
    out = slurm("sinfo", "-h", "-N", "-n", node, "-o", "%T|%E").strip().split("|")
    return out[0], out[1] if len(out) > 1 else ""


def job_state(job: str) -> str:
    out = slurm("squeue", "-h", "-j", job, "-o", "%T").strip()
    if out:
        return out
    log = Path(cluster()["slurm_conf"]).parent / "jobcomp.log"
    for line in reversed(log.read_text().splitlines()):
        if f"JobId={job} " in line:
            return line.split("JobState=")[1].split()[0]
    return ""


def wait(what: str, check: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def elastic_dir() -> str:
    return str(Path(cluster()["slurm_conf"]).parent / "elastic")


def free_node() -> str:
    """A powered-down node of the elastic partition (others may be busy with other tests)."""

    def pick() -> str | None:
        for line in slurm("scontrol", "-o", "show", "node").splitlines():
            name = line.split()[0].removeprefix("NodeName=")
            state = line.split("State=")[1].split()[0]
            if name.startswith("elastic-") and state == "IDLE+CLOUD+POWERED_DOWN":
                return name
        return None

    node: str = wait("a powered-down elastic node", pick, 120)
    return node


@pytest.mark.slow
@needs_elastic
def test_a_job_on_the_elastic_partition_powers_a_cloud_node_up_and_down(
    openstack_cloud: OpenStackCloud,
) -> None:
    from orchestration.drivers.slurm.elastic_testing import BootPlayer

    node = free_node()
    with BootPlayer(elastic_dir=elastic_dir(), boot_delay=2.0) as player:
        job = slurm(
            "sbatch",
            "--parsable",
            "-o",
            "/dev/null",
            "-p",
            "elastic",
            "-w",
            node,
            "--wrap",
            "hostname; sleep 1",
        ).strip()
        # Slurm runs the ResumeProgram: a server appears in Nova for the node
        server = wait("the node's server", lambda: player.cloud.node_servers().get(node), 120)
        assert server.metadata["windtunnel_kind"] == "elastic"
        assert job_state(job) in ("PENDING", "CONFIGURING")
        # the harness plays the boot; slurmd registers; the job runs and completes
        wait("the job to complete", lambda: job_state(job) == "COMPLETED", 180)
        assert node in [e[1] for e in player.events if e[2] == "booted"]
        # the job started when the prolog saw its node registered, not on Slurm's 30 s pass
        log = Path(cluster()["slurm_conf"]).parent / "log" / "slurmctld.log"
        assert f"prolog_running_decr: Configuration for JobId={job} is complete" in (
            log.read_text()
        )
        # after SuspendTime (10 s) idle, the SuspendProgram deletes the server
        wait("the server deleted", lambda: node not in player.cloud.node_servers(), 120)
        wait("the node powered down", lambda: node_state(node)[0] == "idle~", 60)


@pytest.mark.slow
@needs_elastic
def test_a_node_that_never_registers_is_a_failed_boot_and_its_server_is_deleted(
    openstack_cloud: OpenStackCloud,
) -> None:
    from orchestration.drivers.slurm.elastic_testing import BootPlayer

    node = free_node()
    with BootPlayer(elastic_dir=elastic_dir()) as player:
        player.refuse.add(node)  # the image never starts slurmd
        job = slurm(
            "sbatch", "--parsable", "-o", "/dev/null", "-p", "elastic", "-w", node, "--wrap", "true"
        ).strip()
        try:
            wait("the node's server", lambda: player.cloud.node_servers().get(node), 120)
            # ResumeTimeout (40 s): Slurm runs the ResumeFailProgram, which deletes the server
            wait("the server deleted", lambda: node not in player.cloud.node_servers(), 180)
            state, reason = wait(
                "the node down as a failed boot",
                lambda: (
                    (s := node_state(node))[0].startswith("down") and "failed boot" in s[1] and s
                ),
                60,
            )
            assert "ResumeTimeout" in reason
            assert job_state(job) == "PENDING"  # requeued by Slurm, waiting for a node
        finally:
            slurm("scancel", job)
            wait("the node powered down", lambda: node_state(node)[0].endswith("~"), 60)
            slurm("scontrol", "update", f"nodename={node}", "state=resume")
            wait("the node back in service", lambda: node_state(node)[0] == "idle~", 60)


@pytest.mark.slow
@needs_elastic
def test_the_reaper_deletes_servers_of_nodes_slurm_has_powered_down(
    openstack_cloud: OpenStackCloud,
) -> None:
    from orchestration.drivers.slurm.cluster import SlurmCluster
    from orchestration.drivers.slurm.elastic_cloud import ElasticCloud
    from orchestration.drivers.slurm.elastic_nodes import elastic_nodes, elastic_reap
    from orchestration.drivers.slurm.settings import validate_settings as slurm_validate

    settings = json.loads(Path(cluster()["elastic"]).read_text())
    slurm_cluster = SlurmCluster(
        slurm_validate({"slurm_conf": cluster()["slurm_conf"], "partition": "elastic"}), {}
    )
    node = free_node()
    cloud = ElasticCloud(settings)
    cloud.create_nodes([node])  # a server Slurm never asked for (a lost create, a crash)
    try:
        wait("the stray server", lambda: node in cloud.node_servers(), 60)
        row = next(r for r in elastic_nodes(slurm_cluster, settings) if r["node"] == node)
        assert row["slurm_state"] == "idle~" and row["server"].endswith(node)
        assert elastic_reap(slurm_cluster, settings, grace=3600) == []  # too young to judge
        assert elastic_reap(slurm_cluster, settings, grace=0) == [row["server"]]
    finally:
        cloud.delete_nodes([node])
