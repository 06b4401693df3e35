"""Entry point: ``python -m orchestration.agent path/to/run.json``.

Exit codes: 0 finished (a final state was reported), 2 bad spec, 3 stale attempt,
4 portal unreachable for the final report.
"""

from __future__ import annotations

import math
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Sequence

from orchestration import nofollow
from orchestration.agent import AGENT_VERSION, PROVENANCE_FILE, README_FILE, sandbox
from orchestration.agent.case import prepare_case
from orchestration.agent.client import (
    PortalClient,
    PortalError,
    StaleAttempt,
    TransientError,
    with_retries,
)
from orchestration.agent.outcome import Outcome, Stale
from orchestration.agent.reporter import Reporter
from orchestration.agent.rerun import readme_text
from orchestration.agent.spec import AgentSpec, load_spec
from orchestration.agent.supervisor import Supervisor, log
from orchestration.case.casefiles import RenderError
from orchestration.environment import environment_allowlist

TYPE_CHECKING = False  # typing is not imported at run time (every Slurm job starts an agent)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["EXIT_BAD_SPEC", "EXIT_OK", "EXIT_STALE", "EXIT_UNREACHABLE", "main", "run", "warm_up"]

EXIT_OK, EXIT_BAD_SPEC, EXIT_STALE, EXIT_UNREACHABLE = 0, 2, 3, 4
START_TIMEOUT = 60.0  # how long the `running` report is retried before going on regardless
MAX_WRITES = 1000  # the writes a final report names (the latest)
TERMINATED_FINAL_TIMEOUT = 5.0  # after SIGTERM the driver's grace is short
# test-only: a deliberately slower run path, with which the benchmarks' guard is shown to fail
# (backend/config/tests/test_bench_guard.py): after its steps, a run waits this many times
# the time they took (a machine's load slows both alike); unset, as everywhere but that
# test, nothing waits
TEST_ONLY_SLOWDOWN_VAR = "WINDTUNNEL_TEST_ONLY_AGENT_SLOWDOWN"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0].startswith("-"):  # help, or a usage error: argparse says it
        import argparse  # not imported on the common path: every Slurm job starts an agent

        parser = argparse.ArgumentParser(prog="windtunnel-agent", description=__doc__)
        parser.add_argument("spec", help="path to run.json")
        args = [str(parser.parse_args(args).spec)]
    spec, raw, error = load_spec(args[0])
    if spec is None:
        log(error)
        _report_bad_spec(raw, error)
        return EXIT_BAD_SPEC
    terminate = threading.Event()
    _install_signal_handlers(terminate)
    code = run(spec, terminate=terminate)
    own = resource.getrusage(resource.RUSAGE_SELF)
    steps = resource.getrusage(resource.RUSAGE_CHILDREN)
    log(
        f"exit {code}: CPU {own.ru_utime:.2f} s user + {own.ru_stime:.2f} s system in the agent,"
        f" {steps.ru_utime + steps.ru_stime:.2f} s in its steps"
    )
    return code


def warm_up() -> None:
    """What a fork server does once so that the agents it forks need not: the host's
    description (platform.platform() reads the interpreter's binary: ~15 ms) and the
    sandbox's probe."""
    import platform

    platform.platform()
    sandbox.warm_up()


def _install_signal_handlers(terminate: threading.Event) -> None:
    def handler(signum: int, frame: Any) -> None:
        log(f"received {signal.Signals(signum).name}")
        terminate.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)


def _report_bad_spec(raw: dict[str, Any], error: str) -> None:
    """Best effort: when the spec names its portal, tell it why the run cannot start."""
    try:
        client = PortalClient(
            portal_url=str(raw["portal_url"]),
            run_id=str(raw["run_id"]),
            token=str(raw["token"]),
            attempt=int(raw["attempt"]),
            timeout=10.0,
        )
        client.post(
            "state/",
            {"state": "failed", "exit_code": None, "reason": "bad run spec", "message": error},
        )
    except (KeyError, TypeError, ValueError, TransientError, PortalError, StaleAttempt):
        pass


def run(spec: AgentSpec, *, terminate: threading.Event) -> int:
    """Supervise one attempt end to end; return the agent's exit code."""
    client = PortalClient(
        portal_url=spec.portal_url, run_id=spec.run_id, token=spec.token, attempt=spec.attempt
    )
    reporter = Reporter(
        client=client,
        heartbeat_interval=spec.heartbeat_interval,
        telemetry_interval=spec.telemetry_interval,
    )
    supervisor = Supervisor(spec=spec, reporter=reporter, terminate=terminate)
    log(f"run {spec.run_id} attempt {spec.attempt}: starting in {spec.work_dir}")
    # `running` goes from the reporter's thread while the case is prepared and the steps
    # start (a round trip less before the solver, in every Slurm job); its answer's `stop`
    # stops the steps like any other, and a 409 ends the attempt
    reporter.start(running_deadline=time.monotonic() + min(START_TIMEOUT, spec.final_timeout))
    try:
        try:
            outcome = _fetch(spec, client) or _prepare(spec, supervisor)
            if outcome is None:
                supervisor.after_steps = _test_only_slowdown
                outcome = supervisor.run_steps()
            if reporter.stale.is_set():
                raise Stale()
        except Stale:
            log("attempt superseded (409): exiting")
            reporter.close()
            return EXIT_STALE
        reporter.close()
        if reporter.stale.is_set():
            log("attempt superseded (409): exiting")
            return EXIT_STALE
        return _finish(spec, client, reporter, supervisor, outcome, terminate)
    finally:
        supervisor.close()  # the run's cgroup (and anything left in it) goes


def _test_only_slowdown(steps_s: float) -> None:
    """The test-only wait of TEST_ONLY_SLOWDOWN_VAR after steps that took `steps_s` (nothing
    when it is unset), before the run's cores may go to the next run."""
    factor = float(os.environ.get(TEST_ONLY_SLOWDOWN_VAR) or 0)
    if factor > 0:
        time.sleep(factor * steps_s)


def _fetch(spec: AgentSpec, client: PortalClient) -> Outcome | None:
    """With fetch_case, download the case source first; an Outcome only when that fails."""
    if not spec.fetch_case:
        return None
    from orchestration.agent.fetch import CaseFetchError, fetch_case  # lazy: tarfile, VMs only

    deadline = time.monotonic() + min(START_TIMEOUT, spec.final_timeout)
    try:
        from pathlib import Path  # VMs only, as fetch itself

        os.makedirs(spec.work_dir, exist_ok=True)
        files = with_retries(
            lambda: fetch_case(client, dest=Path(spec.case_dir), scratch=Path(spec.work_dir)),
            deadline=deadline,
            what="case download",
        )
    except StaleAttempt:
        raise Stale() from None
    except (TransientError, PortalError, CaseFetchError, OSError) as exc:
        log(f"cannot get the case from the portal: {exc}")
        return Outcome(state="failed", reason="case download failed", message=str(exc))
    log(f"case source downloaded ({files} files)")
    return None


def _prepare(spec: AgentSpec, supervisor: Supervisor) -> Outcome | None:
    """Render the case (and start it from an earlier attempt's write: spec.resume); an
    Outcome only when that fails."""
    try:
        os.makedirs(spec.work_dir, exist_ok=True)
        rendered = prepare_case(
            case_dir=spec.case_dir,
            dest=spec.case_path,
            context=spec.context,
            decompose=spec.decompose,
            rendered=spec.rendered,
        )
    except (RenderError, OSError) as exc:
        log(f"case preparation failed: {exc}")
        return Outcome(state="failed", reason="case preparation failed", message=str(exc))
    by = "by the portal" if spec.rendered is not None else "here"
    log(f"case prepared ({len(rendered)} files rendered {by})")
    if spec.resume is not None:
        from orchestration.agent.resume import ResumeError, apply_resume  # lazy: resumes only

        try:
            resumed = apply_resume(resume=spec.resume, work_dir=spec.work_dir, case=spec.case_path)
        except (ResumeError, OSError) as exc:
            log(f"cannot resume: {exc}")
            return Outcome(state="failed", reason="cannot resume", message=str(exc))
        log(resumed.note or "no earlier write to resume from: starting from the beginning")
        supervisor.resumed = resumed
    return None


def _finish(
    spec: AgentSpec,
    client: PortalClient,
    reporter: Reporter,
    supervisor: Supervisor,
    outcome: Outcome,
    terminate: threading.Event,
) -> int:
    """Last telemetry batch → archive → final state."""
    timeout = spec.final_timeout
    if terminate.is_set():
        timeout = min(timeout, TERMINATED_FINAL_TIMEOUT)
    deadline = time.monotonic() + timeout
    # (a case whose sandbox never started ran no step: it has nothing worth uploading)
    upload = supervisor.case_fd >= 0 and spec.archive == "upload"
    if upload:
        # the steps are over: the portal may give the run's cores to the next run while this
        # one post-processes, sends its last points and uploads its results (without an
        # upload, the final report follows at once and gives them back first thing)
        try:
            client.post("heartbeat/", {"phase": "archiving", "resources": dict(reporter.resources)})
        except (TransientError, PortalError):
            pass
        except StaleAttempt:
            log("attempt superseded (409) while reporting the end: exiting")
            return EXIT_STALE
        # the flow fields and VTK go into the archive; where the portal reads the run's
        # folder itself, it makes them when someone wants them (runs/flow_fields.py), and
        # the run's slot is not held for them
        if outcome.state == "completed" and spec.post_process and not terminate.is_set():
            note = supervisor.post_process()
            if note:
                outcome = outcome._replace(message=f"{outcome.message}\n{note}".strip())
    supervisor.poll_dat()
    figures = supervisor.usage_figures()  # before the archive: its CPU is not the run's
    disk_bytes = supervisor.measure_disk()
    provenance = provenance_record(spec, supervisor)
    import json

    # before the archive: both are in it
    note = _write_case_file(
        supervisor, PROVENANCE_FILE, json.dumps(provenance, indent=2, sort_keys=True, default=str)
    ) or _write_case_file(supervisor, README_FILE, readme_text(provenance, spec.env))
    if note:
        outcome = outcome._replace(message=f"{outcome.message}\n{note}".strip())
    try:
        body: dict[str, Any] = {
            "state": outcome.state,
            "exit_code": outcome.exit_code,
            "reason": outcome.reason,
            "message": outcome.message,
            "solver_converged": outcome.solver_converged,
        }
        if supervisor.iterations is not None:  # with the steps before a resumed write
            before = supervisor.resumed.steps_before if supervisor.resumed is not None else 0
            body["iterations"] = supervisor.iterations + before
        if supervisor.last_time is not None and math.isfinite(supervisor.last_time):
            body["last_time"] = supervisor.last_time
        body["provenance"] = {k: v for k, v in provenance.items() if k != "portal"}
        if disk_bytes is not None:
            body["disk_bytes"] = disk_bytes
        writes = _write_times(supervisor.case_fd)
        if writes is not None:
            body["writes"] = writes
        body.update(figures)
        if upload:
            reporter.flush(deadline=deadline)
            note = _upload_archive(spec, client, supervisor, deadline=deadline)
            if note:
                body["message"] = f"{outcome.message}\n{note}".strip()
        else:  # the last telemetry batch rides with the final report: one request less
            reporter.flush(deadline=deadline, keep_last=True)
            body.update(reporter.take_batch())
        with_retries(
            lambda: client.post("state/", body),
            deadline=deadline,  # with_retries always makes one attempt
            what=f"state {outcome.state}",
        )
    except StaleAttempt:
        log("attempt superseded (409) while reporting the end: exiting")
        return EXIT_STALE
    except (TransientError, PortalError) as exc:
        log(f"could not report the final state: {exc}")
        return EXIT_UNREACHABLE
    log(f"reported {outcome.state} ({outcome.reason or 'ok'})")
    return EXIT_OK


def _write_times(case_fd: int) -> list[str] | None:
    """The writes a later attempt may start from (the case's complete time folders after its
    first: orchestration/agent/resume.py), the last MAX_WRITES; None: the case is unread."""
    if case_fd < 0:
        return None
    try:
        from orchestration.agent.resume import complete_writes  # lazy: at the end only
    except ImportError:  # an image's agent: its backend keeps no attempts to go on from
        return None

    try:
        return complete_writes(case_fd)[-MAX_WRITES:]
    except OSError as exc:
        log(f"writes: {exc}")
        return None


def provenance_record(spec: AgentSpec, supervisor: Supervisor) -> dict[str, Any]:
    """What the agent knows of how it ran the attempt (docs/provenance.md): where, with
    which OpenFOAM build, each command line with its exit code and times, the environment
    the steps saw (names only: values may be private), and its own version; with the
    portal's facts from run.json under `portal`."""
    import platform
    import socket

    header = supervisor.solver_header
    record: dict[str, Any] = {
        "agent_version": AGENT_VERSION,
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "openfoam": {k: v for k, v in header.items() if k in ("version", "build")},
        "hosts": list(header.get("hosts") or ([header["host"]] if header.get("host") else [])),
        "commands": list(supervisor.commands),
        "environment": {
            "allowlist": environment_allowlist(),
            "names": sorted(supervisor.env),
            "set_by_run_configuration": dict(spec.env),
        },
        "sandbox": supervisor.sandbox.mode,
        "limits": supervisor.limits_record(),
        "decompose": dict(spec.decompose) if spec.decompose else None,
        "context": dict(spec.context),
    }
    resumed = supervisor.resumed
    if spec.resume is not None and resumed is not None and resumed.attempt:
        # the write it started from (the one the agent picked when told "latest"), with the
        # iterations added and the settings changed
        chosen = {k: v for k, v in spec.resume.items() if k != "fallback"}
        record["resumed_from"] = {**chosen, "attempt": resumed.attempt, "time": resumed.time}
    if spec.provenance is not None:
        record["portal"] = dict(spec.provenance)
    return record


def _write_case_file(supervisor: Supervisor, name: str, text: str) -> str:
    """A file of the agent's in the case (so in its archive: windtunnel-provenance.json, the
    README); a note when it cannot be written ('' when it was). Made new by descriptor:
    whatever the case left under that name (a link to a host file) is removed, never
    written through."""
    if supervisor.case_fd < 0:
        return ""
    try:
        fd = nofollow.create_file(supervisor.case_fd, name, owner=supervisor.sandbox.uid)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    except OSError as exc:
        log(f"cannot write {name}: {exc}")
        return f"{name}: not written ({exc})"
    return ""


def _upload_archive(
    spec: AgentSpec, client: PortalClient, supervisor: Supervisor, *, deadline: float
) -> str:
    """Build the archive (as the run's uid, in its sandbox) and PUT it; return a note for
    the final message ('' when all went in)."""
    from pathlib import Path  # only when we upload

    from orchestration.agent.confined import ArchiveError, archive_case  # lazy: only on upload

    dest = Path(spec.work_dir) / "result.tar.gz"
    max_bytes = int(spec.archive_max_mb * 1024 * 1024)
    try:
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            notes = archive_case(
                supervisor.sandbox,
                case=spec.case_path,
                out_fd=fd,
                max_bytes=max_bytes,
                timeout=max(deadline - time.monotonic(), 10.0),
            )
        finally:
            os.close(fd)
    except (ArchiveError, OSError) as exc:
        log(f"cannot build the archive: {exc}")
        return f"archive: not built ({exc})"
    try:
        with_retries(
            lambda: client.put_file("archive/", dest, content_type="application/gzip"),
            deadline=deadline,
            what="archive upload",
        )
    except (TransientError, PortalError) as exc:
        log(f"archive upload failed: {exc}")
        return f"archive: upload failed ({exc})"
    return "archive: " + "; ".join(notes) if notes else ""
