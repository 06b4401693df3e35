"""Multi-node MPI runs as Heat stacks (orchestration/drivers/openstack/heat.py).

The argv and run.json rules are checked offline; the rest runs against the loopback OpenStack
control plane (scripts/start-openstack), whose fake compute driver makes servers ACTIVE
without booting them: the stack's shape, metadata, user data, states, events, deletion and
leak reaping are real, the boot scripts are not run (docs/backends/openstack-heat.md says how
they were checked)."""

from __future__ import annotations

import base64
import calendar
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from orchestration.drivers.base import DriverError, RunPhase, RunSpec, Step, build_driver
from orchestration.drivers.openstack.heat import (
    head_run_json,
    load_template,
    mpi_argv,
    stack_events,
    stack_leaks,
    stack_name,
)
from orchestration.tests.conftest import OpenStackCloud

pytestmark = pytest.mark.xdist_group("cluster")
HOSTFILE = "/runs/r/attempt-1/hostfile"
TIMEOUT = 120
CREATE_WITHIN = 60  # seconds from start to CREATE_COMPLETE for two nodes on the fake cloud


def mpi_spec(*, run_id: str | None = None, nodes: int = 2, processes: int = 4) -> RunSpec:
    return RunSpec(
        run_id=run_id or str(uuid.uuid4()),
        attempt=1,
        portal_url="http://127.0.0.1:8000",
        token="tok'\"$(touch /tmp/pwned)`x`",
        case_dir="/cases/cavity",
        work_dir="/runs/r",
        context={"nu": 0.01, "label": "$(reboot) WINDTUNNEL_RUN_JSON __WT_WORK_DIR__ 'q'"},
        steps=(
            Step(name="blockMesh", argv=("blockMesh",), role="prepare"),
            Step(name="decomposePar", argv=("decomposePar", "-force"), role="decompose"),
            Step(
                name="icoFoam",
                argv=(
                    "mpirun",
                    "--oversubscribe",
                    "--bind-to",
                    "none",
                    "-np",
                    str(processes),
                    "icoFoam",
                    "-parallel",
                ),
                role="solve",
            ),
            Step(name="reconstructPar", argv=("reconstructPar", "-latestTime"), role="reconstruct"),
        ),
        processes=processes,
        nodes=nodes,
        memory_gb=2.0,
        decompose={"method": "scotch", "subdomains": processes},
        env={"FOAM_SIGFPE": "1", "bad name": "x"},
    )


# -- offline: the steps and run.json the head's agent gets -----------------------------------


def test_mpirun_gets_the_stacks_hostfile_and_the_runs_process_count() -> None:
    argv = ("mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2", "icoFoam", "-parallel")
    assert mpi_argv(argv, hostfile=HOSTFILE, processes=8) == (
        "mpirun",
        "--hostfile",
        HOSTFILE,
        "-np",
        "8",
        "--oversubscribe",
        "--bind-to",
        "none",
        "icoFoam",
        "-parallel",
    )


def test_the_steps_own_host_options_go_and_the_programs_arguments_stay() -> None:
    argv = (
        "/usr/bin/mpiexec",
        "-n",
        "2",
        "--host",
        "a,b",
        "--hostfile=/elsewhere",
        "--mca",
        "btl",
        "self,tcp",
        "-x",
        "FOO",
        "simpleFoam",
        "-parallel",
        "-np",
        "3",  # the program's own argument, not mpirun's
    )
    assert mpi_argv(argv, hostfile=HOSTFILE, processes=4) == (
        "/usr/bin/mpiexec",
        "--hostfile",
        HOSTFILE,
        "-np",
        "4",
        "--mca",
        "btl",
        "self,tcp",
        "-x",
        "FOO",
        "simpleFoam",
        "-parallel",
        "-np",
        "3",
    )
    assert mpi_argv(("decomposePar", "-force"), hostfile=HOSTFILE, processes=4) == (
        "decomposePar",
        "-force",
    )


def test_head_run_json_keeps_hostile_values_as_data_and_spreads_only_mpirun() -> None:
    spec = mpi_spec()
    data = json.loads(head_run_json(spec, work_dir="/runs/r/attempt-1"))
    assert data["token"] == spec.token
    assert data["context"] == dict(spec.context)
    assert (data["work_dir"], data["case_dir"], data["fetch_case"]) == (
        "/runs/r/attempt-1",
        "/runs/r/attempt-1/source",
        True,
    )
    steps = {s["name"]: s["argv"] for s in data["steps"]}
    assert steps["decomposePar"] == ["decomposePar", "-force"]
    assert steps["icoFoam"][:5] == [
        "mpirun",
        "--hostfile",
        "/runs/r/attempt-1/hostfile",
        "-np",
        "4",
    ]
    assert data["decompose"] == {"method": "scotch", "subdomains": 4}


def test_the_template_makes_network_and_volume_optional() -> None:
    template = load_template()
    assert template["heat_template_version"] == "2018-08-31"
    resources = template["resources"]
    assert resources["volume"]["condition"] == "has_volume"
    assert resources["volume_attachment"]["condition"] == "has_volume"
    assert resources["head_port"]["condition"] == "has_network"
    assert template["parameters"]["network"]["default"] == ""
    assert template["parameters"]["volume_size_gb"]["default"] == 0
    assert template["parameters"]["run_json_b64"]["hidden"] is True


# -- against the loopback cloud ---------------------------------------------------------------


def poll(what: str, check: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.5)
    return found


def make_driver(cloud: OpenStackCloud, **overrides: Any) -> Any:
    facts = cloud.facts
    settings = {
        "cloud": facts["clouds"]["tenant"],
        "clouds_yaml": facts["clouds_yaml"],
        "image": "wt-base",
        "network": "wt-net",
        "boot_timeout": 5,
        "leak_grace": 0,
        "max_nodes": 4,
        **overrides,
    }
    return build_driver("openstack", settings)


def stack_status(driver: Any, handle: str) -> str:
    found = driver.conn.orchestration.find_stack(
        handle.split("/")[-1], ignore_missing=True, resolve_outputs=False
    )
    return "GONE" if found is None else str(found.status)


def servers_of(driver: Any, handle: str) -> list[Any]:
    name = handle.removeprefix("stack:").split("/")[0]
    return list(driver.conn.compute.servers(name=f"^{re.escape(name)}-"))


def wait_created(driver: Any, handle: str) -> None:
    def done() -> bool:
        status = stack_status(driver, handle)
        assert status != "CREATE_FAILED", driver.poll(handle).reason
        return status == "CREATE_COMPLETE"

    poll(f"stack {handle} to be created", done)


def wait_gone(driver: Any, handle: str) -> None:
    poll(
        f"stack {handle} to go", lambda: stack_status(driver, handle) in ("GONE", "DELETE_COMPLETE")
    )
    poll(f"the servers of {handle} to go", lambda: servers_of(driver, handle) == [])


@pytest.fixture(scope="module")
def two_nodes(openstack_cloud: OpenStackCloud) -> Iterator[dict[str, Any]]:
    """A two-node run started through the driver: its stack, created once for the module."""
    driver = make_driver(openstack_cloud)
    spec = mpi_spec()
    started = time.monotonic()
    handle = driver.start(spec)
    first = driver.poll(handle)
    wait_created(driver, handle)
    created = time.monotonic() - started
    print(f"\nstack create -> CREATE_COMPLETE, 2 nodes: {created:.1f} s")
    try:
        yield {"driver": driver, "spec": spec, "handle": handle, "first": first, "created": created}
    finally:
        driver.release(handle)
        wait_gone(driver, handle)


@pytest.mark.slow
def test_heat_validates_the_template_with_and_without_network_and_volume(
    openstack_cloud: OpenStackCloud,
) -> None:
    conn = openstack_cloud.connect("tenant")
    template = load_template()
    network = openstack_cloud.facts["network"]["id"]
    for parameters in ({}, {"network": network}):
        result = conn.orchestration.validate_template(
            template=template, environment={"parameters": parameters}
        )
        assert {"image", "flavor", "worker_count", "run_json_b64"} <= set(result.parameters)
    for parameters in ({"volume_size_gb": 20}, {"network": network, "volume_size_gb": 20}):
        # 99001 = a resource's service is missing from the catalog: this cloud has no Cinder
        conn.orchestration.validate_template(
            template=template, environment={"parameters": parameters}, ignore_errors="99001"
        )
        try:
            conn.orchestration.validate_template(
                template=template, environment={"parameters": parameters}
            )
        except Exception as exc:  # noqa: BLE001 — only the missing Cinder may fail it
            assert "cinder" in str(exc).lower(), exc


@pytest.mark.slow
def test_a_two_node_run_is_a_stack_of_two_servers_with_the_runs_metadata(
    two_nodes: dict[str, Any],
) -> None:
    driver, spec, handle = two_nodes["driver"], two_nodes["spec"], two_nodes["handle"]
    name = stack_name(spec)
    assert re.fullmatch(rf"stack:{re.escape(name)}/[0-9a-f-]{{36}}", handle)
    assert two_nodes["created"] < CREATE_WITHIN
    assert two_nodes["first"].phase == RunPhase.PENDING
    assert two_nodes["first"].reason.startswith("stack creating")
    assert driver.start(spec) == handle  # a retried dispatch finds the stack

    stack = driver.conn.orchestration.get_stack(handle.split("/")[-1])
    assert set(stack.tags) == {"windtunnel", f"run={spec.run_id}", "attempt=1"}
    outputs = {o["output_key"]: o["output_value"] for o in stack.outputs}
    servers = {s.name: s for s in servers_of(driver, handle)}
    assert set(servers) == {f"{name}-head", f"{name}-w0"}
    assert servers[f"{name}-head"].id == outputs["head_id"]
    assert [servers[f"{name}-w0"].id] == outputs["worker_ids"]
    net = "wt-net"
    assert outputs["head_ip"] in [a["addr"] for a in servers[f"{name}-head"].addresses[net]]
    assert outputs["worker_ips"] == [a["addr"] for a in servers[f"{name}-w0"].addresses[net]]
    for server in servers.values():
        assert server.status == "ACTIVE"
        assert server.metadata["windtunnel_run"] == spec.run_id
        assert server.metadata["windtunnel_attempt"] == "1"
        assert server.metadata["windtunnel_kind"] == "run"
        assert server.flavor["original_name"] == "wt.medium"  # 2 cores, 1 GB per node


@pytest.mark.slow
def test_poll_says_pending_while_the_head_boots_then_exited_after_the_boot_timeout(
    two_nodes: dict[str, Any],
) -> None:
    driver, handle = two_nodes["driver"], two_nodes["handle"]
    head = next(s for s in servers_of(driver, handle) if s.name.endswith("-head"))
    created = calendar.timegm(time.strptime(head.created_at, "%Y-%m-%dT%H:%M:%SZ"))
    real_clock = driver.clock
    try:
        driver.clock = lambda: created + 2  # mock only the clock: 2 s after the head came up
        booting = driver.poll(handle)
        assert booting.phase == RunPhase.PENDING
        assert "waiting for the agent" in booting.reason
        driver.clock = lambda: created + 6  # past the 5 s boot timeout
        late = driver.poll(handle)
    finally:
        driver.clock = real_clock
    assert late.phase == RunPhase.EXITED
    assert "boot timeout" in late.reason


@pytest.mark.slow
def test_stack_events_become_run_log_lines_from_the_last_seen_event(
    two_nodes: dict[str, Any],
) -> None:
    driver, spec, handle = two_nodes["driver"], two_nodes["spec"], two_nodes["handle"]
    ident = handle.removeprefix("stack:")
    lines, newest = stack_events(driver, ident, since=None)
    assert newest
    name = stack_name(spec)
    assert lines[0].split()[1:3] == [name, "CREATE_IN_PROGRESS"]
    assert lines[-1].split()[1:3] == [name, "CREATE_COMPLETE"]
    seen = {tuple(line.split()[1:3]) for line in lines}
    assert {("head", "CREATE_COMPLETE"), ("workers", "CREATE_COMPLETE")} <= seen
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ", lines[0])
    assert stack_events(driver, ident, since=newest) == ([], newest)
    assert stack_events(driver, ident, since=_event_id(driver, ident, 2)) == (lines[3:], newest)
    assert stack_events(driver, ident, since="purged-or-unknown") == (lines, newest)


def _event_id(driver: Any, ident: str, index: int) -> str:
    from openstack.orchestration.v1 import stack as _stack

    name, stack_id = ident.split("/")
    ref = _stack.Stack.existing(id=stack_id, name=name)
    event_id: str = list(driver.conn.orchestration.stack_events(ref, sort_dir="asc"))[index].id
    return event_id


@pytest.mark.slow
def test_the_heads_user_data_writes_run_json_and_the_hostfile_and_exports_the_run(
    openstack_cloud: OpenStackCloud, two_nodes: dict[str, Any]
) -> None:
    driver, spec, handle = two_nodes["driver"], two_nodes["spec"], two_nodes["handle"]
    admin = openstack_cloud.connect("admin")
    admin.compute.default_microversion = "2.79"  # user_data is shown from 2.3 on, to admins
    servers = {s.name.rsplit("-", 1)[1]: s for s in servers_of(driver, handle)}
    head = base64.b64decode(admin.compute.get_server(servers["head"].id).user_data).decode()
    worker = base64.b64decode(admin.compute.get_server(servers["w0"].id).user_data).decode()
    work_dir = driver.vm_work_dir(spec)

    assert head.startswith("#!/bin/sh\n")
    assert f"W='{work_dir}'\n" in head
    assert "SLOTS='2'\n" in head  # 4 processes over 2 nodes
    assert "exportfs -o rw,sync,no_subtree_check,root_squash" in head
    assert 'echo "$ip slots=$SLOTS" >> "$W/hostfile"' in head
    assert "export OMPI_MCA_plm_rsh_no_tree_spawn=1" in head
    assert "ENV_NAMES='FOAM_SIGFPE'\n" in head  # "bad name" is not a variable name
    assert '"$PY" -m orchestration.agent "$W/run.json"' in head
    # the addresses came from the cloud, the values from the run only through run.json
    head_ip = servers["head"].addresses["wt-net"][0]["addr"]
    worker_ip = servers["w0"].addresses["wt-net"][0]["addr"]
    assert f"HEAD='{head_ip}'\n" in head and f"WORKERS='{worker_ip}'\n" in head
    assert "$(reboot)" not in head and "pwned" not in head
    encoded = re.search(r"<<'WINDTUNNEL_RUN_JSON'\n([A-Za-z0-9+/=]+)\nWINDTUNNEL_RUN_JSON\n", head)
    assert encoded, "run.json is not in a quoted here-document"
    run_json = json.loads(base64.b64decode(encoded.group(1)))
    assert run_json["run_id"] == spec.run_id and run_json["token"] == spec.token
    assert run_json["context"]["label"] == spec.context["label"]
    solve = next(s for s in run_json["steps"] if s["role"] == "solve")
    assert solve["argv"][:5] == ["mpirun", "--hostfile", f"{work_dir}/hostfile", "-np", "4"]

    assert f"W='{work_dir}'\n" in worker and f"HEAD='{head_ip}'\n" in worker
    assert 'mount -t nfs -o hard,noatime "$HEAD:$W" "$W"' in worker
    assert "authorized_keys" in worker
    assert "run.json" not in worker and spec.token not in worker


@pytest.mark.slow
def test_release_deletes_the_stack_and_its_servers(two_nodes: dict[str, Any]) -> None:
    driver, handle = two_nodes["driver"], two_nodes["handle"]
    assert len(servers_of(driver, handle)) == 2
    started = time.monotonic()
    driver.release(handle)
    driver.release(handle)  # twice is fine
    wait_gone(driver, handle)
    print(f"\nstack delete -> servers gone, 2 nodes: {time.monotonic() - started:.1f} s")
    assert driver.poll(handle).phase == RunPhase.UNKNOWN
    driver.release(handle)  # gone is fine


@pytest.mark.slow
def test_a_stack_without_a_network_still_validates_and_is_created(
    openstack_cloud: OpenStackCloud,
) -> None:
    driver = make_driver(openstack_cloud, network="none")
    handle = driver.start(mpi_spec(nodes=3, processes=3))
    try:
        wait_created(driver, handle)
        servers = servers_of(driver, handle)
        assert len(servers) == 3
        assert all(not s.addresses for s in servers)
    finally:
        driver.release(handle)
        wait_gone(driver, handle)


@pytest.mark.slow
def test_stack_leaks_deletes_untracked_stacks_and_keeps_tracked_ones(
    openstack_cloud: OpenStackCloud,
) -> None:
    driver = make_driver(openstack_cloud, network="none")
    keep, leak = mpi_spec(), mpi_spec()
    handles = [driver.start(keep), driver.start(leak)]
    try:
        for handle in handles:
            wait_created(driver, handle)
        time.sleep(5)  # older than the reaper's grace
        # Other sessions may hold windtunnel stacks in this project too: track everything
        # but the leak, and protect stacks younger than ours by the grace period.
        tracked = {(keep.run_id, 1)}
        for other in driver.conn.orchestration.stacks(tags=["windtunnel"]):
            fields = dict(t.partition("=")[::2] for t in other.tags or () if "=" in t)
            if fields.get("run") != leak.run_id:
                tracked.add((fields.get("run", ""), int(fields.get("attempt") or 0)))
        patient = make_driver(openstack_cloud, network="none", leak_grace=3600)
        assert stack_leaks(patient, tracked=tracked) == []
        reaper = make_driver(openstack_cloud, network="none", leak_grace=5)
        assert stack_leaks(reaper, tracked=tracked) == [stack_name(leak)]
        wait_gone(driver, handles[1])
        assert stack_status(driver, handles[0]) == "CREATE_COMPLETE"
    finally:
        for handle in handles:
            driver.release(handle)
        for handle in handles:
            wait_gone(driver, handle)


def test_a_run_id_that_cannot_name_a_stack_is_refused() -> None:
    from orchestration.drivers.openstack.heat import stack_parameters

    class NoCloud:
        settings: dict[str, Any] = {}

    spec = mpi_spec(run_id="../../etc")
    with pytest.raises(DriverError, match="cannot name a stack"):
        stack_parameters(NoCloud(), spec)  # type: ignore[arg-type]
