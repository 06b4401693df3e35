"""The OpenStack driver's offline parts: settings, flavor choice, the boot script, statuses.
(Against a real control plane: backend/studies/tests/test_openstack_e2e.py.)"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from orchestration.drivers.base import DriverError, RunPhase, RunSpec, SettingsError, Step
from orchestration.drivers.openstack.boot import user_data
from orchestration.drivers.openstack.driver import OpenStackDriver
from orchestration.drivers.openstack.servers import smallest_flavor
from orchestration.drivers.openstack.settings import validate_settings


@dataclasses.dataclass
class Flavor:
    name: str
    vcpus: int
    ram: int
    disk: int = 10
    id: str = ""
    is_disabled: bool = False


FLAVORS = [
    Flavor("big", 8, 16384),
    Flavor("small", 1, 1024),
    Flavor("medium", 2, 4096),
    Flavor("medium-off", 2, 2048, is_disabled=True),
    Flavor("tiny-disk", 2, 2048, disk=1),
]


def _chosen(*, cores: int, memory_gb: float, min_disk_gb: float = 0.0) -> str:
    flavor = smallest_flavor(FLAVORS, cores=cores, memory_gb=memory_gb, min_disk_gb=min_disk_gb)
    assert flavor is not None
    return str(flavor.name)


def test_the_smallest_enabled_flavor_that_fits_is_chosen():
    assert _chosen(cores=1, memory_gb=1) == "small"
    assert _chosen(cores=2, memory_gb=2) == "tiny-disk"
    assert _chosen(cores=2, memory_gb=2, min_disk_gb=5) == "medium"
    assert _chosen(cores=3, memory_gb=1) == "big"
    assert smallest_flavor(FLAVORS, cores=16, memory_gb=1) is None


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({}, "cloud"),
        ({"cloud": "c", "network": ""}, "network"),
        ({"cloud": "c", "flavor": "a b; $(x)"}, "flavor"),
        ({"cloud": "c", "vm_work_root": "/a/../b"}, "vm_work_root"),
        ({"cloud": "c", "vm_python": "python3 -c evil"}, "vm_python"),
        ({"cloud": "c", "security_groups": "default"}, "security_groups"),
        ({"cloud": "c", "clouds_yaml": "relative.yaml"}, "clouds_yaml"),
        ({"auth_url": "keystone:5000"}, "auth_url"),
    ],
)
def test_bad_settings_name_the_field(raw, field):
    with pytest.raises(SettingsError) as err:
        validate_settings(raw)
    assert err.value.field == field


def _spec(**extra) -> RunSpec:
    return RunSpec(
        run_id="00000000-0000-4000-8000-000000000042",
        attempt=2,
        portal_url="http://portal.example:8000",
        token="tok'en\"$(rm -rf /)`x`",
        case_dir="/srv/case",
        work_dir="/srv/runs/x",
        context={"name": "WINDTUNNEL_RUN_JSON\n$(touch /tmp/pwned)", "aoa": 4.0},
        steps=[Step(name="simpleFoam", argv=("simpleFoam",), role="solve")],
        **extra,
    )


def test_the_boot_script_writes_run_json_verbatim_and_expands_nothing(tmp_path: Path):
    spec = _spec()
    work = tmp_path / "vm" / spec.run_id / "attempt-2"
    script = user_data(spec, work_dir=str(work), python="true")  # `true`: no agent here
    marker = Path("/tmp/pwned")
    marker.unlink(missing_ok=True)
    subprocess.run(["sh", "-c", script], check=True, env={"PATH": "/usr/bin:/bin"})
    written = json.loads((work / "run.json").read_text())
    assert written["token"] == spec.token and written["context"] == dict(spec.context)
    assert written["fetch_case"] is True and written["case_dir"] == f"{work}/source"
    assert written["work_dir"] == str(work)
    assert not marker.exists()
    assert (work / "run.json").stat().st_mode & 0o777 == 0o600


def _driver(**settings) -> OpenStackDriver:
    return OpenStackDriver(cloud="c", **settings)


@dataclasses.dataclass
class Server:
    status: str
    created_at: str = ""
    fault: dict[str, Any] | None = None


def test_server_statuses_map_to_run_phases():
    driver = _driver(boot_timeout=60)
    driver.clock = lambda: 1_000_000.0
    young = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_000_000 - 10))
    old = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_000_000 - 120))
    assert driver.server_status(Server("BUILD")).phase == RunPhase.PENDING
    assert driver.server_status(Server("ACTIVE", young)).phase == RunPhase.PENDING
    late = driver.server_status(Server("ACTIVE", old))
    assert late.phase == RunPhase.EXITED and "boot timeout (60 s)" in late.reason
    err = driver.server_status(Server("ERROR", young, {"message": "No valid host was found"}))
    assert err.phase == RunPhase.EXITED and "No valid host" in err.reason
    assert driver.server_status(Server("SHUTOFF", young)).phase == RunPhase.EXITED
    assert driver.server_status(Server("DELETED", young)).phase == RunPhase.UNKNOWN


def test_a_run_wider_than_the_backend_is_refused_before_any_api_call():
    with pytest.raises(DriverError, match="needs 3 nodes"):
        OpenStackDriver(cloud="c", max_nodes=2).prepare(_spec(nodes=3, processes=3))
    assert OpenStackDriver(cloud="c").poll("slurm:123").phase == RunPhase.UNKNOWN
