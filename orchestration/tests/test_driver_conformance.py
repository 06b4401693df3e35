"""The Driver contract, checked on every registered driver that can run on this machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestration.composer.testing import ensure_shared_image, image_tools_missing
from orchestration.drivers.base import (
    Capabilities,
    Driver,
    DriverError,
    RunPhase,
    RunStatus,
    Step,
    driver_kinds,
    get_driver,
)
from orchestration.tests.conftest import FakePortal, make_spec, wait_until
from orchestration.tests.test_slurm_cluster import slurm_settings, slurm_unavailable

RUNNABLE_HERE = {"local", "noop"} | ({"container"} if not image_tools_missing() else set())
RUNNABLE_HERE |= {"slurm"} if not slurm_unavailable() else set()  # scripts/start-slurm
CLOUD_JSON = Path(__file__).resolve().parents[2] / ".data" / "openstack" / "cloud.json"
RUNNABLE_HERE |= {"openstack"} if CLOUD_JSON.is_file() else set()  # scripts/start-openstack
KINDS = [kind for kind in driver_kinds() if kind in RUNNABLE_HERE]
PARAMS = (
    KINDS
    if "slurm" in KINDS
    else [*KINDS, pytest.param("slurm", marks=pytest.mark.skip(reason=slurm_unavailable()))]
)


@pytest.fixture(params=PARAMS)
def driver(request: pytest.FixtureRequest, tmp_path: Path) -> Driver:
    settings = {"work_root": str(tmp_path)}
    if request.param == "container":  # runs the agent in the shared test image
        settings["image"] = ensure_shared_image().ref
    if request.param == "slurm":  # the private test cluster, local transport
        settings = slurm_settings(**settings)
    if request.param == "openstack":  # the loopback cloud; fake servers never run the agent
        cloud = json.loads(CLOUD_JSON.read_text())
        settings = {
            "cloud": cloud["clouds"]["tenant"],
            "clouds_yaml": cloud["clouds_yaml"],
            "image": cloud["image"]["name"],
            "network": "none",
            "cores": 8,
            "memory_gb": 16,
            "max_nodes": 2,
        }
    return get_driver(request.param, settings)


def _spec(portal: FakePortal, tmp_path: Path):
    case = tmp_path / "case"
    (case / "system").mkdir(parents=True)
    return make_spec(
        portal=portal,
        case_dir=case,
        work_dir=tmp_path / "work",
        steps=[Step(name="sleep", argv=("sleep", "60"), role="solve")],
    )


def test_registered_kinds_include_the_built_in_drivers() -> None:
    assert {"local", "noop", "container"} <= set(driver_kinds())


def test_unknown_kind_is_a_driver_error() -> None:
    with pytest.raises(DriverError, match="unknown backend kind"):
        get_driver("no-such-kind", {})


def test_driver_implements_the_protocol(driver: Driver) -> None:
    assert isinstance(driver, Driver)
    assert isinstance(driver.name, str) and driver.name in KINDS


def test_capabilities_are_sane(driver: Driver) -> None:
    caps = driver.capabilities()
    assert isinstance(caps, Capabilities)
    assert caps.kind == driver.name
    assert caps.cores >= 1 and caps.memory_gb > 0 and caps.max_nodes >= 1


def test_unknown_handle_polls_unknown_and_cancel_collect_do_not_raise(driver: Driver) -> None:
    for handle in ("never-issued", "", "4194304:1.0"):
        status = driver.poll(handle)
        assert isinstance(status, RunStatus)
        assert status.phase == RunPhase.UNKNOWN
        driver.cancel(handle, grace=0.5)
        driver.collect(handle)


def test_start_poll_cancel_poll(driver: Driver, portal: FakePortal, tmp_path: Path) -> None:
    spec = _spec(portal, tmp_path)
    driver.prepare(spec)
    handle = driver.start(spec)
    assert isinstance(handle, str) and handle
    first = driver.poll(handle)
    assert first.phase in (RunPhase.PENDING, RunPhase.RUNNING, RunPhase.EXITED)
    driver.cancel(handle, grace=5.0)
    assert wait_until(lambda: driver.poll(handle).phase == RunPhase.EXITED, timeout=30)
    driver.collect(handle)
    assert driver.poll(handle).phase in (RunPhase.EXITED, RunPhase.UNKNOWN)


def test_handles_are_distinct_per_start(driver: Driver, portal: FakePortal, tmp_path: Path) -> None:
    spec = _spec(portal, tmp_path)
    driver.prepare(spec)
    first, second = driver.start(spec), driver.start(spec)
    try:
        assert first != second
    finally:
        driver.cancel(first, grace=5.0)
        driver.cancel(second, grace=5.0)
