"""The one capacity check: what submission, preview, admission and the quota panel ask."""

from __future__ import annotations

import pytest

from compute.capacity import BackendCapacity, CloudCaps
from quotas.fit import (
    Shape,
    Usage,
    effective_limits,
    run_disk_gb,
    run_fit_problem,
    runs_at_once,
    runs_at_once_limited,
    storage_problem,
)
from quotas.models import Quota

QUOTA = Quota(cores=8, memory_gb=16, max_runs=4, max_nodes=2)
LOCAL = BackendCapacity(name="local", kind="local", cores=4, memory_gb=32, max_nodes=1)
CLOUD = BackendCapacity(
    name="os",
    kind="openstack",
    cores=64,
    memory_gb=256,
    max_nodes=4,
    holds_nodes=True,
    cloud=CloudCaps(cores=6, ram_gb=12, instances=3),
)


@pytest.mark.parametrize(
    ("shape", "backend", "limit", "resource", "one_run"),
    [
        (Shape(cores=9, memory_gb=1), CLOUD, "quota", "cores", "your quota allows 8 cores"),
        (Shape(cores=1, memory_gb=17), CLOUD, "quota", "memory", "your quota allows 16 GB"),
        (Shape(cores=3, memory_gb=1, nodes=3), CLOUD, "quota", "nodes", "your quota allows 2"),
        (Shape(cores=5, memory_gb=1), LOCAL, "backend", "cores", "backend local has 4"),
        (Shape(cores=1, memory_gb=1, nodes=2), LOCAL, "backend", "nodes", "at most 1 node"),
        (
            Shape(cores=7, memory_gb=1),
            CLOUD,
            "cloud",
            "cores",
            "project of backend os allows 6 cores",
        ),
        (
            Shape(cores=2, memory_gb=13),
            CLOUD,
            "cloud",
            "memory",
            "13 GB of RAM but the OpenStack project of backend os allows 12 GB",
        ),
    ],
)
def test_a_single_run_that_cannot_ever_fit_names_the_limit_and_the_fix(
    shape, backend, limit, resource, one_run
) -> None:
    problem = run_fit_problem(shape=shape, quota=QUOTA, backend=backend)
    assert problem is not None and (problem.limit, problem.resource) == (limit, resource)
    assert one_run in problem.for_one_run()


def test_nodes_count_against_the_quota_only_where_runs_hold_nodes() -> None:
    wide = Shape(cores=3, memory_gb=1, nodes=1)
    busy = Usage(cores=0, memory_gb=0, nodes=2, runs=1)
    assert run_fit_problem(shape=wide, quota=QUOTA, backend=LOCAL, usage=busy) is None
    held = run_fit_problem(shape=wide, quota=QUOTA, backend=CLOUD, usage=busy)
    assert (
        held is not None
        and str(held) == "2 nodes in use + 1 for this run, over the tenant quota of 2 nodes"
    )


def test_in_use_the_problems_read_as_why_a_run_waits() -> None:
    run = Shape(cores=2, memory_gb=2)
    four = Usage(runs=4)
    assert str(run_fit_problem(shape=run, quota=QUOTA, backend=CLOUD, usage=four)) == (
        "4 of the 4 concurrent runs of the tenant quota in use"
    )
    on_backend = Usage(cores=3, memory_gb=1, runs=1)
    problem = run_fit_problem(shape=run, quota=QUOTA, backend=LOCAL, backend_usage=on_backend)
    assert str(problem) == "3 cores in use + 2 for this run, over the 4 cores backend local has"
    in_cloud = Usage(cores=5, memory_gb=1, nodes=1, runs=1)
    problem = run_fit_problem(shape=run, quota=QUOTA, backend=CLOUD, backend_usage=in_cloud)
    assert str(problem) == (
        "5 cores in use + 2 for this run, over the 6 cores the OpenStack project of backend "
        "os allows"
    )
    off = BackendCapacity(
        name="off", kind="local", cores=4, memory_gb=8, max_nodes=1, enabled=False
    )
    assert str(run_fit_problem(shape=run, quota=QUOTA, backend=off)) == "backend off is disabled"


def test_how_many_runs_fit_at_once_takes_every_limit() -> None:
    assert runs_at_once(shape=Shape(cores=1, memory_gb=1), quota=QUOTA, backend=LOCAL) == 4
    assert runs_at_once(shape=Shape(cores=2, memory_gb=5), quota=QUOTA, backend=CLOUD) == 2
    assert runs_at_once(shape=Shape(cores=7, memory_gb=1), quota=QUOTA, backend=CLOUD) == 0


def test_what_sets_how_many_runs_fit_at_once_is_named() -> None:
    """The wizard says whether the tenant's quota or the backend's capacity sets the pace
    (not "within your 8-core quota" when the backend holds two runs)."""
    two = Shape(cores=2, memory_gb=1)
    assert runs_at_once_limited(shape=two, quota=QUOTA, backend=LOCAL) == (
        2,
        "backend local's 4 cores",
    )
    wide = Quota(cores=2, memory_gb=16, max_runs=4, max_nodes=2)
    assert runs_at_once_limited(shape=two, quota=wide, backend=LOCAL) == (
        1,
        "your quota of 2 cores",
    )
    heavy = Shape(cores=1, memory_gb=5)
    assert runs_at_once_limited(shape=heavy, quota=QUOTA, backend=CLOUD) == (
        2,
        "your quota of 2 nodes",
    )
    assert runs_at_once_limited(shape=Shape(cores=9, memory_gb=1), quota=QUOTA, backend=LOCAL) == (
        0,
        "",
    )


def test_effective_limits_say_where_each_comes_from() -> None:
    (local, cloud) = effective_limits(quota=QUOTA, backends=[LOCAL, CLOUD])
    assert local["limits"]["cores"] == {"value": 4, "source": "backend capacity"}
    assert local["limits"]["memory_gb"] == {"value": 16, "source": "portal quota"}
    assert cloud["limits"]["cores"] == {"value": 6, "source": "cloud project limit"}
    assert cloud["limits"]["nodes"] == {"value": 2, "source": "portal quota"}


GIB = 1024**3


def test_storage_is_full_at_the_quota_and_not_a_byte_below() -> None:
    quota = Quota(storage_gb=2)
    assert storage_problem(quota=quota, stored_bytes=2 * GIB) is not None
    assert storage_problem(quota=quota, stored_bytes=2 * GIB - 1) is None
    assert storage_problem(quota=Quota(storage_gb=0.05), stored_bytes=53_687_092) is not None
    assert storage_problem(quota=Quota(storage_gb=0.05), stored_bytes=53_687_091) is None
    assert storage_problem(quota=Quota(storage_gb=0), stored_bytes=0) is not None  # no room


def test_a_full_storage_quota_names_the_figures_and_the_way_out() -> None:
    problem = storage_problem(quota=Quota(storage_gb=0.05), stored_bytes=218 * 1024**2)
    assert problem is not None and (problem.limit, problem.resource) == ("quota", "storage")
    assert str(problem) == (
        "storage quota of 0.05 GB used up (0.21 GB stored): delete studies or uploads you "
        "no longer need, or ask an admin for more"
    )
    said = problem.for_one_run()
    assert "storage quota (storage_gb) of 0.05 GB is used up (0.21 GB stored" in said
    assert "saved as a draft" in said
    # a few figures, not every megabyte: the runs it holds quote it in their wait reason
    for stored, said in ((51.34, "51.3"), (2500.4, "2,500")):
        problem = storage_problem(quota=Quota(storage_gb=50), stored_bytes=int(stored * GIB))
        assert problem is not None and f"({said} GB stored)" in str(problem)


@pytest.mark.parametrize(
    ("default_gb", "storage_gb", "budget"),
    [(50, 500, 50), (50, 0.05, 0.05), (0, 7.5, 7.5), (0, 0, 0.001), (50, 0, 0.001)],
)
def test_a_runs_disk_budget_is_the_deployments_capped_by_the_storage_quota(
    default_gb, storage_gb, budget
) -> None:
    assert run_disk_gb(quota=Quota(storage_gb=storage_gb), default_gb=default_gb) == budget


def test_an_upload_that_would_use_up_the_storage_quota_is_said_with_its_size() -> None:
    quota = Quota(storage_gb=1)
    assert storage_problem(quota=quota, stored_bytes=GIB // 2, adding_bytes=GIB // 2 - 1) is None
    problem = storage_problem(quota=quota, stored_bytes=GIB // 2, adding_bytes=GIB // 2)
    assert problem is not None and str(problem) == (
        "0.5 GB stored + 0.5 GB for this, over the storage quota of 1 GB: delete studies or "
        "uploads you no longer need, or ask an admin for more"
    )


@pytest.mark.parametrize(
    ("shape", "backend", "named"),
    [
        (Shape(cores=9, memory_gb=1), CLOUD, "your quota of 8 cores"),
        (Shape(cores=5, memory_gb=1), LOCAL, "backend local's 4 cores"),
        (Shape(cores=1, memory_gb=1, nodes=2), LOCAL, "backend local's 1 node per run"),
        (Shape(cores=7, memory_gb=1), CLOUD, "the OpenStack project of backend os (6 cores)"),
        (Shape(cores=2, memory_gb=13), CLOUD, "the OpenStack project of backend os (12 GB of RAM)"),
    ],
)
def test_the_limit_a_single_run_does_not_fit_is_named_where_it_is(shape, backend, named) -> None:
    problem = run_fit_problem(shape=shape, quota=QUOTA, backend=backend)
    assert problem is not None and problem.limit_named() == named
