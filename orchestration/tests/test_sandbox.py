"""The sandbox of a tenant's steps (orchestration/agent/sandbox.py), attacked as a tenant
would: native code loaded through the case's controlDict `libs`, shell steps that look for
the host's files, the agent's token, other runs, the network and root."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from orchestration.agent.sandbox import CASE_MOUNT, SANDBOX_UID_BASE, Sandbox, SandboxError
from orchestration.drivers.base import Step
from orchestration.tests.conftest import FakePortal, make_spec, needs_openfoam, run_locally

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop is tested as root")

# a shared library whose constructor runs when OpenFOAM loads it (controlDict `libs`): it
# records who it runs as and what of the host it can read or write
EVIL_C = r"""
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void evil(void) {
    FILE *out = fopen("pwned.txt", "w");
    if (!out) return;
    fprintf(out, "uid=%d\n", (int)getuid());
    FILE *secret = fopen(SECRET, "r");
    fprintf(out, "secret=%s\n", secret ? "read" : "refused");
    FILE *drop = fopen(DROP, "w");
    fprintf(out, "drop=%s\n", drop ? "written" : "refused");
    fclose(out);
}
"""


_run = run_locally


@needs_openfoam
@as_root
def test_a_library_named_in_controldict_runs_as_nobody_and_sees_nothing_of_the_host(
    portal: FakePortal, cavity: Path, tmp_path: Path
) -> None:
    """A case's `libs ("./lib/x.so")` runs its constructor as nobody, in a sandbox that shows
    nothing of the host, never as root."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler (scripts/test installs gcc)"
    secret = tmp_path / "portal-secret.txt"
    secret.write_text("hunter2")
    secret.chmod(0o644)  # even a world-readable host file is out of sight
    tmp_path.chmod(0o777)  # a host folder anyone may write to, out of the sandbox's sight
    drop = tmp_path / "dropped-by-the-case"
    case = tmp_path / "case"
    shutil.copytree(cavity, case)
    (case / "lib").mkdir()
    source = tmp_path / "evil.c"
    source.write_text(EVIL_C)
    subprocess.run(
        [cc, "-shared", "-fPIC", f'-DSECRET="{secret}"', f'-DDROP="{drop}"', "-o"]
        + [str(case / "lib/x.so"), str(source)],
        check=True,
    )
    control = case / "system/controlDict"
    control.write_text(control.read_text() + '\nlibs ("./lib/x.so");\n')
    work = tmp_path / "run"
    spec = make_spec(
        portal=portal,
        case_dir=case,
        work_dir=work,
        steps=[Step(name="blockMesh", argv=("blockMesh",), role="prepare")],
    )
    final = _run(portal, spec)
    report = (work / "case/pwned.txt").read_text()
    assert int(report.split()[0].removeprefix("uid=")) >= SANDBOX_UID_BASE, report
    assert "secret=refused" in report and "drop=refused" in report, report
    assert not drop.exists()
    assert final["state"] == "completed", final


@needs_openfoam
def test_a_step_sees_only_its_case_a_readonly_system_and_no_network(
    portal: FakePortal, cavity: Path, tmp_path: Path
) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    marker = Path("/tmp") / f"windtunnel-host-tmp-{os.getpid()}"
    marker.write_text("host")
    probe = (
        f"id -u > probe.txt; pwd >> probe.txt;"
        f" test -e {marker} && echo host-tmp-visible >> probe.txt;"
        f" test -e {tmp_path}/run/run.json && echo token-visible >> probe.txt;"
        f" ls /work /root 2>/dev/null && echo host-dirs-visible >> probe.txt;"
        f" touch /usr/evil 2>/dev/null && echo usr-writable >> probe.txt;"
        f" (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo network >> probe.txt;"
        " echo done >> probe.txt"
    )
    spec = make_spec(
        portal=portal,
        case_dir=cavity,
        work_dir=tmp_path / "run",
        steps=[Step(name="probe", argv=("bash", "-c", probe), role="prepare")],
    )
    try:
        final = _run(portal, spec)
    finally:
        marker.unlink()
        listener.close()
    lines = (tmp_path / "run/case/probe.txt").read_text().split()
    assert final["state"] == "completed", final
    assert lines[1:] == [CASE_MOUNT, "done"], lines  # none of the probes got through
    if os.geteuid() == 0:
        assert int(lines[0]) >= SANDBOX_UID_BASE


@needs_openfoam
def test_mpi_runs_in_the_sandbox_without_allow_run_as_root(
    portal: FakePortal, cavity: Path, tmp_path: Path
) -> None:
    spec = make_spec(
        portal=portal,
        case_dir=cavity,
        work_dir=tmp_path / "run",
        steps=[
            Step(name="env", argv=("sh", "-c", "env > env.txt"), role="prepare"),
            Step(name="mpi", argv=("mpirun", "-np", "2", "--oversubscribe", "hostname")),
        ],
    )
    final = _run(portal, spec)
    assert final["state"] == "completed", final
    assert (tmp_path / "run/case/log.mpi").read_text().split() == ["windtunnel"] * 2
    assert "ALLOW_RUN_AS_ROOT" not in (tmp_path / "run/case/env.txt").read_text()


def test_without_bubblewrap_the_run_fails_saying_what_to_install(
    portal: FakePortal, cavity: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("sh", "env", "python3", "prlimit", "setpriv"):  # everything but bwrap
        if found := shutil.which(tool):
            (tools / tool).symlink_to(found)
    monkeypatch.setenv("PATH", f"{tools}:/nonexistent")
    sandbox = Sandbox({"mode": "bwrap"}, run_id="r")
    with pytest.raises(SandboxError, match="apt-get install bubblewrap"):
        sandbox.prepare(case=str(cavity), home=str(tmp_path / "home"))


def test_sandbox_settings_are_checked() -> None:
    with pytest.raises(SandboxError, match="not one of bwrap, uid, off"):
        Sandbox({"mode": "chroot"}, run_id="r")
    with pytest.raises(SandboxError, match="processes"):
        Sandbox({"limits": {"processes": -1}}, run_id="r")
    off = Sandbox({"mode": "off"}, run_id="r")
    assert off.command(["icoFoam"]) == ["icoFoam"]
    uid = Sandbox({"mode": "uid", "limits": {"cpu_hours": 2}}, run_id="r")
    argv = uid.command(["icoFoam"])
    assert argv[-1] == "icoFoam" and "--cpu=7200" in argv and "bwrap" not in argv
    if os.geteuid() == 0:  # the same run always gets the same uid, another run another
        assert uid.uid == Sandbox({"mode": "uid"}, run_id="r").uid
        assert uid.uid != Sandbox({"mode": "uid"}, run_id="s").uid


SYSTEM_CALL = """
functions
{
    pwn
    {
        type            systemCall;
        libs            ("libutilityFunctionObjects.so");
        executeCalls    ("touch systemcall-ran");
        writeCalls      ();
        endCalls        ();
    }
}
"""
CODE_STREAM = """
writeInterval #codeStream
{
    code
    #{
        system("touch codestream-ran");
        os << 20;
    #};
};
"""


@needs_openfoam
@pytest.mark.parametrize(
    ("addition", "marker"), [(SYSTEM_CALL, "systemcall-ran"), (CODE_STREAM, "codestream-ran")]
)
def test_a_case_can_neither_run_commands_nor_compile_code(
    portal: FakePortal, cavity: Path, tmp_path: Path, addition: str, marker: str
) -> None:
    """systemCall function objects and #codeStream (also coded boundary conditions, which
    compile the same way) stay off inside the sandbox: OpenFOAM's allowSystemOperations."""
    case = tmp_path / "case"
    shutil.copytree(cavity, case)
    control = case / "system/controlDict"
    control.write_text(control.read_text() + addition)
    spec = make_spec(
        portal=portal,
        case_dir=case,
        work_dir=tmp_path / "run",
        steps=[
            Step(name="blockMesh", argv=("blockMesh",), role="prepare"),
            Step(name="icoFoam", argv=("icoFoam",), role="solve"),
        ],
    )
    final = _run(portal, spec)
    assert not (tmp_path / "run/case" / marker).exists(), final
    if marker == "codestream-ran":  # refused outright: the run fails saying why
        assert final["state"] == "failed", final
        log = (tmp_path / "run/case/log.blockMesh").read_text()
        assert "allowSystemOperations" in log or "not enabled" in log, log[-2000:]


@needs_openfoam
def test_a_failing_step_reports_the_sandbox_paths_not_the_hosts(
    portal: FakePortal, cavity: Path, tmp_path: Path
) -> None:
    """Run messages reveal no host path (a dictionary error quotes its file): in the sandbox
    the case is /case, and that is all a message can name."""
    case = tmp_path / "case"
    shutil.copytree(cavity, case)
    control = case / "system/blockMeshDict"
    control.write_text(control.read_text() + "\nbroken ( ;\n")
    work = tmp_path / "run"
    spec = make_spec(
        portal=portal,
        case_dir=case,
        work_dir=work,
        steps=[Step(name="blockMesh", argv=("blockMesh",), role="prepare")],
    )
    final = _run(portal, spec)
    assert final["state"] == "failed", final
    assert f"{CASE_MOUNT}/system/blockMeshDict" in final["message"], final
    assert str(tmp_path) not in final["message"] and str(work) not in final["message"], final


def test_the_cpu_a_sandboxed_step_spends_is_counted(
    portal: FakePortal, cavity: Path, tmp_path: Path
) -> None:
    """bubblewrap's outer process leaves its namespace init (which reaped the step) behind:
    the agent adopts and reaps it, so the step's CPU time reaches its accounting."""
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass"
    spec = make_spec(
        portal=portal,
        case_dir=cavity,
        work_dir=tmp_path / "run",
        steps=[Step(name="burn", argv=("python3", "-c", burn), role="prepare")],
    )
    final = _run(portal, spec)
    assert final["state"] == "completed", final
    log = (tmp_path / "run" / "agent.log").read_text()
    steps = float(log.rsplit(" s in its steps", 1)[0].rsplit(", ", 1)[1])
    assert steps >= 0.5, log[-300:]


@as_root
def test_a_step_runs_under_its_limits_and_is_the_oom_killers_first_choice(
    portal: FakePortal, cavity: Path, tmp_path: Path
) -> None:
    """The file size, CPU time and process limits of run.json hold in the step (as `ulimit`
    inside the sandbox reads them), and in the run's cgroup the step, not its agent, is what
    the OOM killer takes first."""
    probe = (
        "ulimit -f > limits.txt; ulimit -t >> limits.txt; ulimit -u >> limits.txt;"
        " cat /proc/self/oom_score_adj >> limits.txt"
    )
    spec = make_spec(
        portal=portal,
        case_dir=cavity,
        work_dir=tmp_path / "run",
        steps=[Step(name="probe", argv=("bash", "-c", probe), role="prepare")],
        sandbox={
            "mode": "bwrap",
            "limits": {"file_size_gb": 1, "cpu_hours": 2, "processes": 300, "memory_gb": 2},
        },
    )
    final = _run(portal, spec)
    assert final["state"] == "completed", final
    size, cpu, processes, oom = (tmp_path / "run/case/limits.txt").read_text().split()
    # bash counts the file size in 1024-byte blocks
    assert (int(size), int(cpu), int(processes)) == (1024**2, 7200, 300)
    agent_oom = int(Path("/proc/self/oom_score_adj").read_text())
    # a host where the run got its cgroup: the step goes first
    if final["provenance"]["limits"]["cgroup"]:
        assert int(oom) == 1000
    else:
        assert int(oom) == agent_oom
