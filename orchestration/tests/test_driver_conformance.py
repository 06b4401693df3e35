"""The Driver contract, checked on every registered driver that can run on this machine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestration.composer.testing import ensure_shared_image, image_tools_missing
from orchestration.drivers.base import (
    Capabilities,
    Driver,
    DriverError,
    DriverTraits,
    RunPhase,
    RunStatus,
    Step,
    build_driver,
    driver_kinds,
    driver_supports,
    driver_traits,
)
from orchestration.drivers.capabilities import (
    BatchStart,
    CloudLimited,
    EndExplainer,
    HealthCheck,
    LeakReaper,
    ResultsReader,
    RunEvents,
    StartupLog,
)
from orchestration.tests.conftest import FakePortal, make_spec, wait_until
from orchestration.tests.test_slurm_cluster import slurm_settings, slurm_unavailable

RUNNABLE_HERE = {"local", "noop"} | ({"container"} if not image_tools_missing() else set())
RUNNABLE_HERE |= {"slurm"} if not slurm_unavailable() else set()  # scripts/start-slurm
CLOUD_JSON = Path(__file__).resolve().parents[2] / ".data" / "openstack" / "cloud.json"
RUNNABLE_HERE |= {"openstack"} if CLOUD_JSON.is_file() else set()  # scripts/start-openstack
KINDS = [kind for kind in driver_kinds() if kind in RUNNABLE_HERE]
# the Slurm cluster and OpenStack control plane of a test run, shared one test at a time
# (conftest.py)
ON_THE_CLUSTER = {"slurm", "openstack"}
PARAMS = [
    pytest.param(kind, marks=[pytest.mark.xdist_group("cluster")])
    if kind in ON_THE_CLUSTER
    else kind
    for kind in KINDS
]
if "slurm" not in KINDS:
    PARAMS.append(pytest.param("slurm", marks=pytest.mark.skip(reason=slurm_unavailable())))


@pytest.fixture(params=PARAMS)
def driver(request: pytest.FixtureRequest, tmp_path: Path) -> Driver:
    settings: dict[str, Any] = {"work_root": str(tmp_path)}
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
            "leak_grace": 86_400,  # the reaper's check below must not touch other tests' servers
        }
    built: Driver = build_driver(request.param, settings)
    return built


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
        build_driver("no-such-kind", {})


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


CAPABILITIES = (
    BatchStart,
    CloudLimited,
    EndExplainer,
    HealthCheck,
    LeakReaper,
    ResultsReader,
    RunEvents,
    StartupLog,
)


@pytest.mark.parametrize("kind", driver_kinds())
def test_traits_are_declared_with_their_types(kind: str) -> None:
    traits = driver_traits(kind)
    assert isinstance(traits, DriverTraits) and traits.kind == kind
    for name in ("holds_nodes", "queues_runs", "releases_early", "prerenders_case"):
        assert isinstance(getattr(traits, name), bool), name
    assert isinstance(traits.frees_on_end, bool) and isinstance(traits.on_portal_host, bool)
    assert traits.image_kind in (None, "container", "vm")
    assert isinstance(traits.secret_fields, tuple)
    assert all(isinstance(f, str) and f for f in traits.secret_fields)
    # a queue of its own means nodes of its own; early release means the portal's own cores
    assert not traits.queues_runs or traits.holds_nodes
    assert not traits.releases_early or traits.on_portal_host


def test_a_capability_read_from_the_class_matches_the_built_driver(driver: Driver) -> None:
    for capability in CAPABILITIES:
        assert driver_supports(driver.name, capability) == isinstance(driver, capability)


def test_driver_declares_the_capabilities_it_implements(
    driver: Driver, portal: FakePortal, tmp_path: Path
) -> None:
    """Every optional capability a driver declares answers in the shape its protocol says."""
    spec = _spec(portal, tmp_path)
    if isinstance(driver, ResultsReader):
        where = driver.results_dir(spec)
        assert where is None or (isinstance(where, str) and where.startswith("/"))
    if isinstance(driver, StartupLog):
        text = driver.startup_log(run_id=spec.run_id, attempt=9, work_dir=str(tmp_path / "none"))
        assert text == ""  # an attempt that never ran has no log
    if isinstance(driver, EndExplainer):
        assert driver.ended_by_backend("never-issued") is None
    if isinstance(driver, HealthCheck):
        report = driver.check()
        assert report["ok"] is True
        assert {"cores", "memory_gb", "nodes"} <= set(report["capacity"])
    if isinstance(driver, CloudLimited):
        limits = driver.cloud_limits()
        assert limits.cores is None or limits.cores >= 0
    if isinstance(driver, LeakReaper):
        assert driver.reap_leaks(tracked=set(), builders=frozenset()) == []  # nothing that old
    if isinstance(driver, RunEvents):
        assert driver.run_events("server:never-issued", since=None) == ([], None)
    if isinstance(driver, BatchStart):
        specs = [spec, _spec(portal, tmp_path / "second")]
        for one in specs:
            driver.prepare(one)
        handles = driver.start_batch(specs)
        try:
            assert len(handles) == 2 and len(set(handles)) == 2
            assert all(driver.poll(h).phase != RunPhase.UNKNOWN for h in handles)
        finally:
            for handle in handles:
                driver.cancel(handle, grace=5.0)
