"""A hostile case against what runs with more rights than it: the agent (root) working in
the run's directory, and the kernel's limits. Each test acts as a tenant's code would:
from inside the sandbox (its steps, a compiled helper), or as the run's uid from outside
while the run goes on; and each checks what the attacker would have got."""

from __future__ import annotations

import errno
import io
import os
import secrets
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from orchestration.agent.sandbox import SANDBOX_UID_BASE, Sandbox
from orchestration.drivers.base import RunPhase, Step
from orchestration.drivers.local import LocalDriver
from orchestration.tests.conftest import (
    RUN_ID,
    FakePortal,
    make_spec,
    needs_openfoam,
    run_locally,
    wait_until,
)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the agent's rights are root's")


_run = run_locally


def _secret_file(folder: Path, name: str = "root-only.txt") -> tuple[Path, str]:
    """A host file only root may read or write (mode 0600), as a portal's secrets are."""
    folder.mkdir(parents=True, exist_ok=True)
    token = f"TOPSECRET-{secrets.token_hex(8)}"
    path = folder / name
    path.write_text(f"{token}\n" * 200)  # whatever offset a reader starts at, it hits one
    path.chmod(0o600)
    return path, token


def _sh(name: str, script: str, role: str = "prepare") -> Step:
    return Step(name=name, argv=("sh", "-c", script), role=role)


def _small_case(tmp_path: Path) -> Path:
    case = tmp_path / "case-src"
    (case / "system").mkdir(parents=True)
    (case / "system" / "controlDict").write_text("application none;\n")
    return case


def _compile(source: str, program: Path) -> None:
    """A C program of the case's own (what a hostile case ships, compiled elsewhere)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler (scripts/test installs gcc)"
    c_file = program.with_suffix(".c")
    c_file.write_text(source)
    subprocess.run([cc, "-O0", "-o", str(program), str(c_file)], check=True)
    c_file.unlink()


def _everything_sent(portal: FakePortal) -> str:
    return "\n".join(repr(call.body) for call in portal.calls)


def test_a_log_the_case_swapped_for_a_link_never_writes_through_it(
    portal: FakePortal, tmp_path: Path
) -> None:
    """The critical one: the case makes `log.<next step>` a link to a root-only host file;
    the agent, as root, made the next step's log by opening that name for writing, and
    overwrote the host file with the step's output."""
    secret, token = _secret_file(tmp_path / "host")
    before = secret.read_bytes()
    spec = make_spec(
        portal=portal,
        case_dir=_small_case(tmp_path),
        work_dir=tmp_path / "run",
        steps=[_sh("plant", f"ln -s {secret} log.next"), _sh("next", "echo second-step")],
    )
    final = _run(portal, spec)
    assert final["state"] == "completed", final
    assert secret.read_bytes() == before  # not a byte of the host file changed
    log = tmp_path / "run/case/log.next"
    assert not log.is_symlink() and log.read_text() == "second-step\n"
    assert token not in _everything_sent(portal)


def test_a_log_replaced_by_a_link_while_its_step_runs_shows_nothing_of_the_link(
    portal: FakePortal, tmp_path: Path
) -> None:
    """The log follower reopened the log by name on every read: a step that swaps its own
    log for a link to a host file had the agent read that file into the live log."""
    secret, token = _secret_file(tmp_path / "host")
    script = f"echo before; rm log.swap; ln -s {secret} log.swap; sleep 1; echo after"
    spec = make_spec(
        portal=portal,
        case_dir=_small_case(tmp_path),
        work_dir=tmp_path / "run",
        steps=[_sh("swap", script, role="solve")],
    )
    final = _run(portal, spec)
    assert final["state"] == "completed", final
    sent = _everything_sent(portal)
    assert token not in sent
    assert "before" in sent and "after" in sent  # the step's own output still arrives


def test_function_object_files_that_are_links_or_fifos_are_never_read(
    portal: FakePortal, tmp_path: Path
) -> None:
    """postProcessing/*.dat are followed as root: a link there to a host file of numbers
    would have sent them as the run's series, and a FIFO would have held the agent."""
    numbers = tmp_path / "host" / "numbers.dat"
    numbers.parent.mkdir()
    numbers.write_text("# Time Cd Cl\n1 4242 4343\n2 4242 4343\n")
    numbers.chmod(0o600)
    script = (
        "mkdir -p postProcessing/forceCoeffs/0 postProcessing/probes;"
        f" ln -s {numbers} postProcessing/forceCoeffs/0/coefficient.dat;"
        f" ln -s {numbers.parent} postProcessing/probes/0;"
        " mkfifo postProcessing/forceCoeffs/0/pipe.dat;"
        " mkdir -p postProcessing/mine/0; printf '# Time a\\n1 7\\n' > postProcessing/mine/0/a.dat;"
        " sleep 2.5"
    )
    spec = make_spec(
        portal=portal,
        case_dir=_small_case(tmp_path),
        work_dir=tmp_path / "run",
        steps=[_sh("solve", script, role="solve")],
    )
    final = _run(portal, spec)
    assert final["state"] == "completed", final  # the FIFO held nothing
    series = portal.series()
    assert "mine.a" in series  # the case's own file is followed
    assert not any(name.startswith("forceCoeffs") or "probes" in name for name in series)


@needs_openfoam
def test_files_the_agent_writes_or_removes_in_the_case_never_follow_its_links(
    portal: FakePortal, cavity: Path, tmp_path: Path
) -> None:
    """After the steps the agent writes windtunnel-provenance.json and removes the case's
    own windtunnel/fields.json before the flow-field step: through links planted there, a
    host file was overwritten and another removed."""
    secret, _ = _secret_file(tmp_path / "host")
    before = secret.read_bytes()
    host_dir = tmp_path / "host-fields"
    host_dir.mkdir()
    (host_dir / "fields.json").write_text("{}")
    plant = f"ln -s {secret} windtunnel-provenance.json; ln -s {host_dir} windtunnel"
    spec = make_spec(
        portal=portal,
        case_dir=cavity,
        work_dir=tmp_path / "run",
        steps=[Step(name="blockMesh", argv=("blockMesh",), role="prepare"), _sh("plant", plant)],
    )
    final = _run(portal, spec)
    assert final["state"] == "completed", final
    assert secret.read_bytes() == before
    assert (host_dir / "fields.json").read_text() == "{}"  # not removed
    provenance = tmp_path / "run/case/windtunnel-provenance.json"
    assert provenance.is_file() and not provenance.is_symlink()  # the agent's own, new file


def test_the_result_archive_holds_nothing_the_case_linked_to(
    portal: FakePortal, tmp_path: Path
) -> None:
    """`constant` swapped for a link to a root-only host folder, files linked to a host
    secret: the archive is made by the run's uid in its sandbox, and leaves links out."""
    host = tmp_path / "host"
    secret, token = _secret_file(host, "transportProperties")
    plant = (
        f"mkdir -p constant; echo nu 1; rm -rf constant; ln -s {host} constant;"
        f" ln -s {secret} log.extra; mkdir -p system; ln -s {secret} system/evil;"
        " mkdir -p 1; echo mine > 1/U"
    )
    spec = make_spec(
        portal=portal,
        case_dir=_small_case(tmp_path),
        work_dir=tmp_path / "run",
        steps=[_sh("plant", plant, role="solve")],
    )
    final = _run(portal, spec)
    assert final["state"] == "completed", final
    (upload,) = portal.of("archive/")
    with tarfile.open(fileobj=io.BytesIO(upload.body), mode="r:gz") as tar:
        names = tar.getnames()
        contents = b"".join(
            (tar.extractfile(m) or io.BytesIO()).read() for m in tar.getmembers() if m.isfile()
        )
    assert "1/U" in names and "log.plant" in names  # the case's own files are there
    assert not any(n.startswith("constant") or n in ("log.extra", "system/evil") for n in names)
    assert token.encode() not in contents


def _probe_source() -> str:
    return r"""
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <unistd.h>
static void say(const char *name, long rc) { printf("%s=%d\n", name, rc == -1 ? errno : 0); }
int main(void) {
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    say("unshare_user", unshare(CLONE_NEWUSER));
    say("clone_user", syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0));
    say("clone3", syscall(SYS_clone3, 0, 0));
    say("mount", mount("none", "/tmp", "tmpfs", 0, 0));
    say("keyctl", syscall(SYS_keyctl, 1 /* JOIN_SESSION_KEYRING */, 0));
    say("bpf", syscall(SYS_bpf, 0, 0, 0));
    say("perf_event_open", syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
    say("ptrace", ptrace(PTRACE_TRACEME, 0, 0, 0));
    say("setns", syscall(SYS_setns, 0, 0));
    say("io_uring_setup", syscall(SYS_io_uring_setup, 1, 0));
    say("userfaultfd", syscall(SYS_userfaultfd, 0));
    return 0;
}
"""


def test_a_compiled_helper_in_the_sandbox_can_make_no_namespace_and_call_nothing_denied(
    portal: FakePortal, tmp_path: Path
) -> None:
    """Nested user namespaces gave a case full capabilities inside (and mount); the seccomp
    filter denies them and what container runtimes deny by default."""
    case = _small_case(tmp_path)
    _compile(_probe_source(), case / "probe")
    spec = make_spec(
        portal=portal,
        case_dir=case,
        work_dir=tmp_path / "run",
        steps=[
            Step(name="probe", argv=("./probe",), role="prepare"),
            _sh("userns", "unshare -U -r id -u; echo exit=$?"),
        ],
    )
    final = _run(portal, spec)
    assert final["state"] == "completed", final
    results = dict(
        line.split("=", 1)
        for line in (tmp_path / "run/case/log.probe").read_text().split()
        if "=" in line
    )
    expected = {name: str(errno.EPERM) for name in results} | {"clone3": str(errno.ENOSYS)}
    assert len(results) == 11 and results == expected, results
    userns = (tmp_path / "run/case/log.userns").read_text()
    assert "exit=0" not in userns and "Operation not permitted" in userns, userns


I386_UNSHARE = r"""
#include <stdio.h>
int main(void) {
    long ret, nr = 310 /* unshare, in the i386 table */, flags = 0x10000000 /* NEWUSER */;
    __asm__ volatile ("int $0x80" : "=a"(ret) : "a"(nr), "b"(flags) : "memory");
    printf("unshare=%ld\n", ret);
    return 0;
}
"""


def test_system_calls_through_another_abi_do_not_slip_past_the_filter(
    portal: FakePortal, tmp_path: Path
) -> None:
    """`int 0x80` reaches the i386 system call table from 64-bit code, where the numbers a
    filter checks differ: the filter kills such a call instead of judging it."""
    case = _small_case(tmp_path)
    _compile(I386_UNSHARE, case / "i386")
    spec = make_spec(
        portal=portal,
        case_dir=case,
        work_dir=tmp_path / "run",
        steps=[Step(name="abi", argv=("./i386",), role="prepare")],
    )
    final = _run(portal, spec)
    assert final["state"] == "failed" and "SIGSYS" in final["reason"], final
    assert "unshare=" not in (tmp_path / "run/case/log.abi").read_text()


def test_a_run_over_its_memory_fails_saying_so_and_nothing_else_is_killed(
    portal: FakePortal, tmp_path: Path
) -> None:
    """`memory_gb: 0.1` was only a number the local backend admitted by: a run used 1.16 GB.
    Its cgroup's limit stops it; the agent (outside the group) reports, and a process
    beside it on the host lives on."""
    neighbour = subprocess.Popen(["sleep", "60"])
    hog = "x = bytearray(400 * 1024 * 1024)\nfor i in range(0, len(x), 4096): x[i] = 1"
    spec = make_spec(
        portal=portal,
        case_dir=_small_case(tmp_path),
        work_dir=tmp_path / "run",
        steps=[Step(name="hog", argv=("python3", "-c", hog), role="solve")],
        sandbox={"mode": "bwrap", "limits": {"memory_gb": 0.1}},
    )
    try:
        final = _run(portal, spec)
        assert neighbour.poll() is None  # the neighbour was not the OOM killer's pick
    finally:
        neighbour.kill()
        neighbour.wait()
    assert final["state"] == "failed", final
    assert final["reason"] == "memory_limit", final
    assert "memory limit of 0.1 GB exceeded" in final["message"], final


def test_memory_filled_with_files_kills_a_step_never_the_agent_that_reports_it(
    portal: FakePortal, tmp_path: Path
) -> None:
    """Memory a run fills with files in its /dev/shm belongs to no process: the OOM killer
    would pick the largest process in the run's cgroup, which the agent shares, unless the
    steps are its first choice. The step goes, the agent reports why."""
    spec = make_spec(
        portal=portal,
        case_dir=_small_case(tmp_path),
        work_dir=tmp_path / "run",
        steps=[_sh("fill", "head -c 400000000 /dev/zero > /dev/shm/fill; sleep 5")],
        sandbox={"mode": "bwrap", "limits": {"memory_gb": 0.1}},
    )
    final = _run(portal, spec)
    assert final["state"] == "failed" and final["reason"] == "memory_limit", final


def test_the_kernel_holds_a_run_to_its_cores_and_processes(
    portal: FakePortal, tmp_path: Path
) -> None:
    """Busy processes in a run of a quarter of a core, with room for 16 processes: seen from
    the host while it runs, the run's cgroup has its CPU quota (the quarter, and a tenth for
    the agent) the kernel throttles it by, and a process limit; the run could start fewer
    than 16 of the 64 it tried. (A quarter of a core: even on a machine busy with other
    work, fifteen busy processes ask for more than that, and the kernel holds them to it.)"""
    burn = (
        "import os, time\n"
        "ok = 0\n"
        "for _ in range(64):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            end = time.time() + 3.0\n"
        "            while time.time() < end: pass\n"
        "            os._exit(0)\n"
        "        ok += 1\n"
        "    except OSError:\n"
        "        pass\n"
        "while True:\n"
        "    try: os.wait()\n"
        "    except ChildProcessError: break\n"
        "print('started', ok)\n"
    )
    spec = make_spec(
        portal=portal,
        case_dir=_small_case(tmp_path),
        work_dir=tmp_path / "run",
        steps=[Step(name="burn", argv=("python3", "-c", burn), role="prepare")],
        sandbox={"mode": "bwrap", "limits": {"cpus": 0.25, "processes": 16}},
    )
    driver = LocalDriver(fork_server=False)
    driver.prepare(spec)
    handle = driver.start(spec)

    agent = f"run-{RUN_ID}-a1-p{handle.partition(':')[0]}"  # its agent's cgroups' name

    def limited() -> tuple[Path, Path] | None:
        """The run's cgroups of the CPU and pids controllers, once its agent made both (one
        per hierarchy, one after another; named after the agent's pid, so a run of another
        test on another worker is not taken for this one)."""
        groups = [g for g in _run_groups() if g.name == agent]
        cpu = next((g for g in groups if (g / "cpu.stat").exists()), None)
        pids = next((g for g in groups if (g / "pids.max").exists()), None)
        return (cpu, pids) if cpu and pids else None

    assert wait_until(lambda: limited() is not None, timeout=60), "the run has no cgroup"
    cpu, pids = limited() or (Path(), Path())
    quota = (
        (cpu / "cpu.cfs_quota_us").read_text()
        if (cpu / "cpu.cfs_quota_us").exists()
        else ((cpu / "cpu.max").read_text().split()[0])
    )
    assert int(quota) == 35_000 and pids.joinpath("pids.max").read_text().strip() == "16"
    throttled = 0
    for _ in range(50):
        stat = dict(line.split() for line in (cpu / "cpu.stat").read_text().splitlines())
        throttled = int(stat.get("nr_throttled", 0))
        if throttled:
            break
        time.sleep(0.05)
    assert throttled > 0  # the quota is what the kernel applies, not a number on a page
    assert wait_until(lambda: driver.poll(handle).phase == RunPhase.EXITED)
    final = portal.of("state/")[-1].body
    assert final["state"] == "completed", final
    started = int((tmp_path / "run/case/log.burn").read_text().split()[-1])
    assert started < 16, started


def test_a_run_that_outgrows_its_disk_budget_fails_saying_so(
    portal: FakePortal, tmp_path: Path
) -> None:
    """A tenant with a 50 MB quota wrote 218 MB: the agent measures the run's directory
    and stops the run past its budget; the final report says what it took."""
    spec = make_spec(
        portal=portal,
        case_dir=_small_case(tmp_path),
        work_dir=tmp_path / "run",
        steps=[_sh("fill", "head -c 8000000 /dev/urandom > big; sleep 30", role="solve")],
        sandbox={"mode": "bwrap", "limits": {"disk_gb": 0.002}},
    )
    started = time.monotonic()
    final = _run(portal, spec)
    assert time.monotonic() - started < 30  # stopped, not waited out
    assert final["state"] == "failed" and final["reason"] == "disk_budget", final
    assert "disk budget of 0.002 GB exceeded" in final["message"], final
    assert final["disk_bytes"] >= 8_000_000, final


def test_a_daemon_a_step_leaves_behind_is_killed_with_the_run(
    portal: FakePortal, tmp_path: Path
) -> None:
    """Without a PID namespace (uid mode: a container's or a VM's), a step that leaves its
    process group and session lives on after the step; the run's cgroup ends it."""
    spec = make_spec(
        portal=portal,
        case_dir=_small_case(tmp_path),
        work_dir=tmp_path / "run",
        steps=[_sh("daemon", "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo started")],
        sandbox={"mode": "uid"},
    )
    final = _run(portal, spec)
    assert final["state"] == "completed", final
    uid = Sandbox({"mode": "uid"}, run_id=RUN_ID).uid
    assert uid is not None and uid >= SANDBOX_UID_BASE
    left = [
        p
        for p in os.listdir("/proc")
        if p.isdigit() and _uid_of(int(p)) == uid and "sleep" in _cmdline(int(p))
    ]
    assert left == []


def _run_groups() -> list[Path]:
    """The run's cgroups on this host (one per hierarchy), wherever the agent made them."""
    found = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        for name in dirs:
            if name.startswith(f"run-{RUN_ID}-a1-p"):
                found.append(Path(root) / name)
        dirs[:] = [d for d in dirs if not d.startswith("run-")]
    return found


def _uid_of(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""
