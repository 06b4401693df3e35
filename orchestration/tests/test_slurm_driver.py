"""The Slurm driver: settings, batch scripts, states; and, on the private test cluster, real
runs through sbatch with the agent reporting to a fake portal (local transport)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from orchestration.drivers.base import DriverError, RunPhase, RunSpec, Step, build_driver
from orchestration.drivers.slurm import (
    SettingsError,
    SlurmDriver,
    explain_reason,
    parse_exit_code,
    parse_handle,
    validate_settings,
)
from orchestration.tests.conftest import (
    FakePortal,
    make_spec,
    needs_openfoam,
    serial_steps,
    wait_until,
)
from orchestration.tests.test_slurm_cluster import needs_slurm, slurm_settings, squeue

pytestmark = pytest.mark.xdist_group("cluster")

# -- settings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "field", "words"),
    [
        ({"transport": "rsh"}, "transport", "unknown transport"),
        ({"transport": "ssh", "user": "u"}, "host", "host name"),
        ({"transport": "ssh", "host": "login1"}, "user", "user name"),
        ({"partition": "gpu;rm -rf /"}, "partition", "partition name"),
        ({"account": "a b"}, "account", "account name"),
        ({"qos": "$(id)"}, "qos", "QOS name"),
        ({"time_limit": "forever"}, "time_limit", "time limit"),
        ({"extra_directives": ["--mail-user=a b"]}, "extra_directives", "plain sbatch option"),
        ({"extra_directives": ["--ntasks=99"]}, "extra_directives", "set by the driver"),
        ({"modules": ["openfoam; reboot"]}, "modules", "module name"),
        ({"env": {"BAD NAME": "1"}}, "env", "variable name"),
        ({"env": {"X": "two\nlines"}}, "env", "one-line"),
        ({"work_root": "/scratch/my runs"}, "work_root", "path"),
        ({"work_root": "../../etc"}, "work_root", "without '..'"),
        ({"slurm_conf": "/etc/slurm/../passwd"}, "slurm_conf", "without '..'"),
        # sbatch takes any unambiguous prefix: --outp is --output, --arr is --array
        ({"extra_directives": ["--outp=/tmp/x-%j"]}, "extra_directives", "not an option"),
        ({"extra_directives": ["--arr=0-1"]}, "extra_directives", "not an option"),
        ({"extra_directives": ["--uid=0"]}, "extra_directives", "not an option"),
        ({"extra_directives": ["--hold"]}, "extra_directives", "not an option"),
        ({"extra_directives": ["--export-file=/etc/passwd"]}, "extra_directives", "not an option"),
        ({"extra_directives": ["--constr=avx2"]}, "extra_directives", "full name: --constraint"),
        ({"capacity": "guess"}, "capacity", "'ask'"),
        ({"port": 70000}, "port", "between"),
    ],
)
def test_bad_settings_name_the_field(settings, field, words) -> None:
    with pytest.raises(SettingsError) as err:
        validate_settings(settings)
    assert err.value.field == field and words in err.value.message


def test_strict_settings_refuse_unknown_keys_and_secrets_in_the_clear() -> None:
    with pytest.raises(SettingsError, match="unknown setting"):
        validate_settings({"partiton": "debug"}, strict=True)
    with pytest.raises(SettingsError, match="is a secret"):
        validate_settings({"private_key": "-----BEGIN"}, strict=True)


def test_defaults_stage_cases_only_over_ssh() -> None:
    assert validate_settings({})["stage_case"] is False
    ssh = validate_settings({"transport": "ssh", "host": "login1", "user": "cfd"})
    assert ssh["stage_case"] is True and ssh["port"] == 22
    assert validate_settings({"agent_path": "/opt/wt"})["pythonpath"] == "/opt/wt"


def test_driver_construction_with_bad_settings_is_a_driver_error() -> None:
    with pytest.raises(DriverError, match="invalid Slurm backend settings: transport"):
        build_driver("slurm", {"transport": "telnet"})


# -- handles, reasons, exit codes -----------------------------------------------------------


def test_handles() -> None:
    assert parse_handle("123") == (123, None)
    assert parse_handle("123_7") == (123, 7)
    for bad in ("", "never-issued", "4194304:1.0", "12_", "_3", "1;2"):
        assert parse_handle(bad) is None


def test_pending_reasons_are_explained_and_unknown_ones_kept() -> None:
    assert explain_reason("Resources").startswith("Resources (waiting for free")
    assert "per user" in explain_reason("QOSMaxCpuPerUserLimit")
    assert explain_reason("SomethingNew") == "SomethingNew"


def test_exit_codes_from_squeue_wait_status_and_sacct() -> None:
    assert parse_exit_code("0") == 0
    assert parse_exit_code("768") == 3  # squeue: wait status
    assert parse_exit_code("15") == -15  # killed by SIGTERM
    assert parse_exit_code("3:0") == 3 and parse_exit_code("0:9") == -9  # sacct
    assert parse_exit_code("") is None


# -- batch scripts --------------------------------------------------------------------------


def _plain_spec(tmp_path: Path, i: int = 1, **extra):
    case = tmp_path / "case"
    (case / "system").mkdir(parents=True, exist_ok=True)
    fields = {
        "run_id": f"00000000-0000-4000-8000-{i:012d}",
        "attempt": 1,
        "portal_url": "http://127.0.0.1:9",
        "token": "t",
        "case_dir": str(case),
        "work_dir": str(tmp_path / f"run{i}" / "attempt-1"),
        "context": {"x": "$(reboot)"},
        "steps": [Step(name="sleep", argv=("sleep", "60"))],
        "memory_gb": 1.5,
        **extra,
    }
    return RunSpec(**fields)


def test_batch_script_maps_resources_and_quotes_every_value(tmp_path: Path) -> None:
    driver = SlurmDriver(
        partition="short,long",
        account="cfd-lab",
        qos="normal",
        time_limit="2:00:00",
        extra_directives=["--constraint=avx2", "--exclusive"],
        modules=["openfoam/2312", "openmpi/4.1"],
        env={"FOAM_SIGFPE": "1", "NOTE": "it's $(not) `run`; ok"},
        python="/opt/wt/bin/python3",
        pythonpath="/opt/wt/src",
    )
    spec = _plain_spec(tmp_path, processes=8, nodes=2, memory_gb=3.0)
    script = driver._script([spec])
    for line in (
        "#SBATCH --ntasks=8",
        "#SBATCH --nodes=2",
        "#SBATCH --mem=1536M",  # per node
        "#SBATCH --time=2:00:00",
        "#SBATCH --partition=short,long",
        "#SBATCH --account=cfd-lab",
        "#SBATCH --qos=normal",
        "#SBATCH --constraint=avx2",
        "#SBATCH --exclusive",
        "#SBATCH --no-requeue",
        "module load openfoam/2312 || exit 97",
        "export NOTE='it'\"'\"'s $(not) `run`; ok'",
        "exec /opt/wt/bin/python3 -m orchestration.agent run.json",
    ):
        assert line in script.splitlines(), line
    assert "$(reboot)" not in script  # run parameters travel in run.json only
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_an_array_script_picks_its_run_by_task_id(tmp_path: Path) -> None:
    specs = [_plain_spec(tmp_path, i) for i in range(3)]
    script = SlurmDriver()._script(specs)
    assert "#SBATCH --array=0-2" in script
    assert 'RUN_DIR="${RUN_DIRS[$SLURM_ARRAY_TASK_ID]}"' in script
    for spec in specs:
        assert f"  {spec.work_dir}" in script
    out = subprocess.run(
        ["bash", "-c", script.split("cd ")[0] + 'echo "$RUN_DIR"'],
        env={"SLURM_ARRAY_TASK_ID": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == specs[1].work_dir


def test_a_run_needs_a_task_per_node(tmp_path: Path) -> None:
    with pytest.raises(DriverError, match="at least one task per node"):
        SlurmDriver().prepare(_plain_spec(tmp_path, processes=1, nodes=2))


# -- on the test cluster --------------------------------------------------------------------


@pytest.fixture
def slurm(tmp_path: Path) -> SlurmDriver:
    driver = build_driver("slurm", slurm_settings(work_root=str(tmp_path / "slurm-work")))
    assert isinstance(driver, SlurmDriver)
    return driver


@needs_slurm
@needs_openfoam
def test_a_cavity_run_goes_through_sbatch_and_the_agent_reports(
    slurm: SlurmDriver, portal: FakePortal, cavity: Path, tmp_path: Path
) -> None:
    spec = make_spec(
        portal=portal, case_dir=cavity, work_dir=tmp_path / "unused", steps=serial_steps()
    )
    slurm.prepare(spec)
    handle = slurm.start(spec)
    assert parse_handle(handle) == (int(handle), None)
    assert portal.wait_for(lambda: "completed" in portal.states(), timeout=120), portal.states()
    assert wait_until(lambda: slurm.poll(handle).phase == RunPhase.EXITED, timeout=30)
    status = slurm.poll(handle)
    assert status.exit_code == 0 and status.reason == ""
    assert portal.series()["residual.Ux"]
    run_dir = tmp_path / "slurm-work" / "runs" / spec.run_id / "attempt-1"
    assert (run_dir / "run.json").stat().st_mode & 0o777 == 0o600
    assert f"slurm job {handle}" in (run_dir / "agent.log").read_text()
    assert slurm.ended_by_backend(handle) is None


@needs_slurm
def test_twenty_runs_make_job_arrays_split_below_max_array_size(
    portal: FakePortal, tmp_path: Path
) -> None:
    driver = build_driver("slurm", slurm_settings(work_root=str(tmp_path / "w"), max_array_size=8))
    case = tmp_path / "case"
    (case / "system").mkdir(parents=True)
    specs = [
        make_spec(
            portal=portal,
            case_dir=case,
            work_dir=tmp_path / "unused",
            steps=[Step(name="true", argv=("true",), role="solve")],
            run_id=f"00000000-0000-4000-8000-{i:012d}",
            memory_gb=0.25,
            heartbeat_interval=5.0,
        )
        for i in range(20)
    ]
    for spec in specs:
        driver.prepare(spec)
    handles = driver.start_batch(specs)
    jobs = [job for job in map(parse_handle, handles) if job is not None]
    assert len(jobs) == len(handles)
    assert all(task is not None for _, task in jobs)
    assert [task for _, task in jobs] == [*range(8), *range(8), *range(4)]
    assert len({job for job, _ in jobs}) == 3  # 20 = 8 + 8 + 4 tasks, each array ≤ 8
    assert "wt-array" in squeue("-h", "-t", "all", "-o", "%j")

    def finished() -> bool:
        return sum(1 for s in portal.states() if s == "completed") == 20

    assert portal.wait_for(finished, timeout=240), portal.states()
    assert wait_until(
        lambda: all(driver.poll(h).phase == RunPhase.EXITED for h in handles), timeout=30
    )


@needs_slurm
def test_pending_run_shows_slurms_reason_and_cancel_works_pending_and_running(
    slurm: SlurmDriver, portal: FakePortal, tmp_path: Path
) -> None:
    case = tmp_path / "case"
    (case / "system").mkdir(parents=True)
    cpus = slurm.capabilities().cores

    def spec(i: int, processes: int):
        return make_spec(
            portal=portal,
            case_dir=case,
            work_dir=tmp_path / "unused",
            steps=[Step(name="sleep", argv=("sleep", "120"), role="solve")],
            run_id=f"00000000-0000-4000-8000-{i:012d}",
            processes=processes,
            memory_gb=0.25,
        )

    big, waiting = spec(1, cpus), spec(2, 1)  # the first fills the node
    for s in (big, waiting):
        slurm.prepare(s)
    running = slurm.start(big)
    pending = slurm.start(waiting)
    try:
        assert wait_until(lambda: slurm.poll(running).phase == RunPhase.RUNNING, timeout=30)
        assert portal.wait_for(lambda: "running" in portal.states(), timeout=60)
        status = slurm.poll(pending)
        assert status.phase == RunPhase.PENDING
        assert status.reason.split(" ")[0] in ("Resources", "Priority"), status.reason
        slurm.cancel(pending, grace=5)
        assert wait_until(lambda: slurm.poll(pending).phase == RunPhase.EXITED, timeout=30)
        assert "CANCELLED" in slurm.poll(pending).reason
        slurm.cancel(running, grace=10)  # SIGTERM to the agent: it reports and exits
        assert wait_until(lambda: slurm.poll(running).phase == RunPhase.EXITED, timeout=30)
        assert portal.wait_for(lambda: "cancelled" in portal.states(), timeout=10)
        assert portal.of("state/")[-1].body["reason"] == "terminated"
    finally:
        for handle in (running, pending):
            slurm.cancel(handle, grace=0)


@needs_slurm
def test_unknown_jobs_poll_unknown_and_capacity_can_be_asked(slurm: SlurmDriver) -> None:
    assert slurm.poll("999999").phase == RunPhase.UNKNOWN
    assert slurm.poll("999999_3").phase == RunPhase.UNKNOWN
    caps = build_driver("slurm", slurm_settings(capacity="ask")).capabilities()
    assert caps.cores >= 1 and caps.memory_gb > 0 and caps.max_nodes == 1
    fixed = build_driver("slurm", slurm_settings(cores=64, memory_gb=256)).capabilities()
    assert (fixed.cores, fixed.memory_gb) == (64, 256)
    report = slurm.check()
    assert report["ok"] and report["max_array_size"] >= 1
    assert any(p["partition"].rstrip("*") == "debug" for p in report["partitions"])


@needs_slurm
def test_a_bad_partition_is_refused_by_sbatch_with_its_message(
    portal: FakePortal, tmp_path: Path
) -> None:
    driver = build_driver("slurm", slurm_settings(partition="nosuchpartition"))
    case = tmp_path / "case"
    (case / "system").mkdir(parents=True)
    spec = make_spec(
        portal=portal,
        case_dir=case,
        work_dir=tmp_path / "w",
        steps=[Step(name="t", argv=("true",))],
    )
    driver.prepare(spec)
    with pytest.raises(DriverError, match="sbatch refused the job: .*[Pp]artition") as err:
        driver.start(spec)
    assert not err.value.retryable
    assert shutil.which("sbatch")
