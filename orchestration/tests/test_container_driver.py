"""The container driver: its command line per runtime, and real runs of the agent inside the
shared test image (podman) against a fake portal, compared with the local driver."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from orchestration.composer.testing import ensure_shared_image, image_tools_missing
from orchestration.drivers.base import Driver, DriverError, RunPhase, Step
from orchestration.drivers.container import CASE_MOUNT, WORK_MOUNT, ContainerDriver, container_argv
from orchestration.drivers.local import LocalDriver
from orchestration.tests.conftest import (
    RUN_ID,
    FakePortal,
    make_cavity,
    make_spec,
    needs_openfoam,
    parallel_steps,
    serial_steps,
    wait_until,
)

needs_images = pytest.mark.skipif(bool(image_tools_missing()), reason=image_tools_missing() or "ok")


# -- the command line ----------------------------------------------------------------------


def _argv(runtime: str, **extra):
    fields = {
        "runtime": runtime,
        "binary": runtime,
        "image": "localhost/windtunnel/x:1",
        "name": "wt-1",
        "work_dir": "/runs/r/attempt-1",
        "case_dir": "/templates/cavity",
        "scratch_dir": "/runs/r/attempt-1/scratch",
        "mounts": {"/data": "/srv/data:ro"},
        "network": "host",
        "cpus": 2.0,
        "memory_gb": 1.5,
        "user": "1000:1000",
        "env": {"A": "1"},
        "ulimits": {"nofile": "1024:4096"},
        **extra,
    }
    return container_argv(**fields)


def test_podman_command_mounts_case_read_only_work_scratch_and_extra_mounts() -> None:
    argv = _argv("podman", oci_runtime="runc")
    assert argv[:3] == ["podman", "--runtime", "runc"]
    assert argv[3:5] == ["run", "-d"]
    volumes = [argv[i + 1] for i, a in enumerate(argv) if a == "-v"]
    assert volumes == [
        f"/templates/cavity:{CASE_MOUNT}:ro",
        f"/runs/r/attempt-1:{WORK_MOUNT}",
        "/runs/r/attempt-1/scratch:/scratch",
        "/srv/data:/data:ro",
    ]
    assert argv[argv.index("--network") + 1] == "host"
    assert argv[argv.index("--cpus") + 1] == "2"
    assert argv[argv.index("--memory") + 1] == "1536m"
    assert argv[argv.index("--user") + 1] == "1000:1000"
    assert "--http-proxy=false" in argv  # no proxy between the agent and the portal
    assert argv[argv.index("--ulimit") + 1] == "nofile=1024:4096"
    image_at = argv.index("localhost/windtunnel/x:1")
    assert argv[image_at + 1 : image_at + 3] == ["sh", "-c"]
    assert f"{WORK_MOUNT}/run.json" in argv[image_at + 3]


def test_docker_command_has_the_same_shape_without_podman_only_flags() -> None:
    argv = _argv("docker")
    assert argv[:3] == ["docker", "run", "-d"] and "--http-proxy=false" not in argv
    assert argv[argv.index("--memory") + 1] == "1536m"


def test_no_network_and_no_limits_leave_the_flags_out() -> None:
    argv = _argv("podman", network=None, cpus=None, memory_gb=None)
    assert "--network" not in argv and "--cpus" not in argv and "--memory" not in argv


def test_buildah_runs_in_the_foreground_on_a_working_container() -> None:
    argv = _argv("buildah")
    assert argv[:4] == ["buildah", "run", "--isolation", "chroot"]
    assert "--cpus" not in argv  # chroot isolation applies no cgroup limits
    assert argv[argv.index("--") - 1] == "wt-1"


def test_relative_mounts_and_unknown_runtimes_are_refused() -> None:
    with pytest.raises(DriverError, match="absolute"):
        _argv("podman", mounts={"data": "/srv/data"})
    with pytest.raises(DriverError, match="unknown container runtime"):
        ContainerDriver(runtime="lxc")


def test_a_run_without_an_image_is_refused(portal: FakePortal, tmp_path: Path) -> None:
    driver = ContainerDriver(work_root=str(tmp_path))
    spec = make_spec(
        portal=portal, case_dir=tmp_path, work_dir=tmp_path / "w", steps=serial_steps()
    )
    with pytest.raises(DriverError, match="no image"):
        driver.prepare(spec)


@needs_images
def test_an_image_missing_from_storage_is_a_clear_error(portal: FakePortal, tmp_path: Path) -> None:
    driver = ContainerDriver(work_root=str(tmp_path), image="localhost/windtunnel/absent:0")
    spec = make_spec(
        portal=portal, case_dir=tmp_path, work_dir=tmp_path / "w", steps=serial_steps()
    )
    with pytest.raises(DriverError, match="not in this host's podman storage"):
        driver.prepare(spec)


# -- real runs -----------------------------------------------------------------------------


def _run(
    driver: Driver, portal: FakePortal, case: Path, work: Path, steps: list[Step], **extra: Any
) -> int | None:
    spec = make_spec(portal=portal, case_dir=case, work_dir=work, steps=steps, **extra)
    driver.prepare(spec)
    handle = driver.start(spec)
    try:
        assert wait_until(lambda: driver.poll(handle).phase == RunPhase.EXITED, timeout=240), (
            f"agent still running; {work / 'agent.log'}"
        )
        return driver.poll(handle).exit_code
    finally:
        driver.collect(handle)


def _values(portal: FakePortal, name: str) -> list[list[float]]:
    return portal.series()[name]


@pytest.fixture(scope="module")
def image() -> str:
    return ensure_shared_image().ref


@pytest.mark.solver
@pytest.mark.slow
@needs_openfoam
@needs_images
def test_cavity_in_the_container_gives_the_local_backends_results(
    image: str, tmp_path: Path
) -> None:
    case = make_cavity(tmp_path / "template")
    results = {}
    for kind, driver in (
        ("local", LocalDriver(work_root=str(tmp_path))),
        ("container", ContainerDriver(work_root=str(tmp_path), image=image)),
    ):
        fake = FakePortal()
        fake.thread.start()
        try:
            code = _run(driver, fake, case, tmp_path / kind, serial_steps())
            assert code == 0, (tmp_path / kind / "agent.log").read_text()

            def completed(f: FakePortal = fake) -> bool:
                return "completed" in f.states()

            assert fake.wait_for(completed, timeout=30)
            results[kind] = fake.series()
            if kind == "container":
                (upload,) = fake.of("archive/")
                with tarfile.open(fileobj=io.BytesIO(upload.body), mode="r:gz") as tar:
                    assert "log.icoFoam" in tar.getnames()
        finally:
            fake.server.shutdown()
            fake.server.server_close()
    local, container = results["local"], results["container"]
    for name in ("residual.Ux", "residual.p", "continuity.cumulative"):
        assert container[name] == local[name], name  # same OpenFOAM build, same numbers
    run_json = json.loads((tmp_path / "container" / "run.json").read_text())
    assert run_json["case_dir"] == CASE_MOUNT and run_json["work_dir"] == WORK_MOUNT
    assert run_json["image"] == image
    assert (tmp_path / "container" / "case" / "constant" / "polyMesh" / "points").is_file()


@pytest.mark.solver
@pytest.mark.slow
@needs_openfoam
@needs_images
def test_parallel_cavity_runs_mpirun_inside_the_container(
    image: str, portal: FakePortal, tmp_path: Path
) -> None:
    case = make_cavity(tmp_path / "template")
    driver = ContainerDriver(work_root=str(tmp_path), image=image)
    code = _run(
        driver,
        portal,
        case,
        tmp_path / "work",
        parallel_steps(2),
        processes=2,
        decompose={"method": "simple", "subdomains": 2},
    )
    assert code == 0, (tmp_path / "work" / "agent.log").read_text()
    assert portal.states()[-1] == "completed"
    assert (tmp_path / "work" / "case" / "processor1").is_dir()
    assert len(_values(portal, "residual.p")) >= 5


@pytest.mark.slow
@needs_images
def test_scratch_is_mounted_the_case_is_read_only_and_limits_apply(
    image: str, portal: FakePortal, tmp_path: Path
) -> None:
    case = tmp_path / "case"
    (case / "system").mkdir(parents=True)
    scratch = tmp_path / "scratch-root"
    driver = ContainerDriver(work_root=str(tmp_path), image=image, scratch=str(scratch))
    probe = (
        "touch /scratch/probe && echo case=$(touch /wt/case/x 2>/dev/null && echo rw || echo ro)"
        " && echo mem=$(cat /sys/fs/cgroup/memory.max 2>/dev/null"
        " || cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"
    )
    steps = [Step(name="probe", argv=("sh", "-c", probe), role="other")]
    code = _run(driver, portal, case, tmp_path / "work", steps, memory_gb=0.5)
    assert code == 0
    assert portal.wait_for(lambda: "completed" in portal.states(), timeout=30)
    log = "\n".join(portal.log_lines())
    assert "case=ro" in log
    assert f"mem={512 * 1024**2}" in log
    run_id = RUN_ID
    assert (scratch / run_id / "attempt-1" / "probe").is_file()
