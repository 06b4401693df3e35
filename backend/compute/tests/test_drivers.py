"""The portal asks drivers what a backend is; the kinds it stores are the drivers'."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from catalog.choices import BackendKind
from catalog.models import Backend
from compute.capacity import capacity_of
from compute.drivers import CloudLimited, driver_for, kinds, run_work_dir, supports, traits_of


def test_the_backend_kinds_a_row_may_have_are_the_registered_drivers() -> None:
    assert sorted(BackendKind.values) == kinds()


def test_traits_and_capabilities_come_from_the_driver_class() -> None:
    assert traits_of("slurm").holds_nodes and traits_of("slurm").queues_runs
    assert traits_of("local").releases_early and not traits_of("local").holds_nodes
    assert traits_of("openstack").image_kind == "vm" and traits_of("openstack").frees_on_end
    assert supports("openstack", CloudLimited) and not supports("local", CloudLimited)
    assert traits_of("no-such-kind").holds_nodes is False  # an old row: it can do nothing


def test_a_driver_is_built_from_the_row_its_capacity_and_the_runs_directory(settings) -> None:
    backend = Backend(name="here", kind="local", cores=3, memory_gb=5.0, max_nodes=1)
    driver = driver_for(backend)
    caps = driver.capabilities()
    assert (caps.cores, caps.memory_gb) == (3, 5.0)
    assert driver.work_root == str(settings.RUNS_DIR)


def test_cloud_limits_cap_a_backend_only_where_its_driver_has_them() -> None:
    limits = {"cores": 4, "ram_gb": 8.0, "instances": 2}
    cloud = Backend(name="c", kind="openstack", cores=9, memory_gb=9, cloud_limits=limits)
    local = Backend(name="l", kind="local", cores=9, memory_gb=9, cloud_limits=limits)
    caps = capacity_of(cloud).cloud
    assert caps is not None and caps.cores == 4
    assert capacity_of(local).cloud is None


@pytest.mark.parametrize("runs_dir", ["/srv/runs", "/srv/runs/", "/srv//a/./runs", "rel/runs", "."])
def test_a_runs_directory_is_where_pathlib_puts_it(settings, runs_dir):
    settings.RUNS_DIR = runs_dir
    run_id = uuid.uuid4()
    assert run_work_dir(run_id=run_id, attempt=3) == str(Path(runs_dir) / str(run_id) / "attempt-3")
