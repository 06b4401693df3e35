"""Entry point: ``python -m orchestration.agent path/to/run.json``.

Exit codes: 0 finished (a final state was reported), 2 bad spec, 3 stale attempt,
4 portal unreachable for the final report.
"""

from __future__ import annotations

import resource
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestration.agent.case import prepare_case
from orchestration.agent.client import (
    PortalClient,
    PortalError,
    StaleAttempt,
    TransientError,
    with_retries,
)
from orchestration.agent.reporter import Reporter
from orchestration.agent.spec import AgentSpec, load_spec
from orchestration.agent.supervisor import Outcome, Stale, Supervisor, log
from orchestration.casefiles import RenderError

__all__ = ["EXIT_BAD_SPEC", "EXIT_OK", "EXIT_STALE", "EXIT_UNREACHABLE", "main", "run"]

EXIT_OK, EXIT_BAD_SPEC, EXIT_STALE, EXIT_UNREACHABLE = 0, 2, 3, 4
START_TIMEOUT = 60.0  # how long the `running` report is retried before going on regardless
TERMINATED_FINAL_TIMEOUT = 5.0  # after SIGTERM the driver's grace is short


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0].startswith("-"):  # help, or a usage error: argparse says it
        import argparse  # not imported on the common path: every Slurm job starts an agent

        parser = argparse.ArgumentParser(prog="windtunnel-agent", description=__doc__)
        parser.add_argument("spec", type=Path, help="path to run.json")
        args = [str(parser.parse_args(args).spec)]
    spec, raw, error = load_spec(Path(args[0]))
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
    try:
        if _report_running(client, reporter, spec):
            outcome = Outcome(state="cancelled", reason="stopped by the portal")
        else:
            reporter.start()
            outcome = _fetch(spec, client) or _prepare(spec) or supervisor.run_steps()
    except Stale:
        log("attempt superseded (409): exiting")
        reporter.close()
        return EXIT_STALE
    reporter.close()
    return _finish(spec, client, reporter, supervisor, outcome, terminate)


def _report_running(client: PortalClient, reporter: Reporter, spec: AgentSpec) -> bool:
    """POST state running; True when the portal already wants the run stopped."""
    deadline = time.monotonic() + min(START_TIMEOUT, spec.final_timeout)
    try:
        answer = with_retries(
            lambda: client.post(
                "state/", {"state": "running", "exit_code": None, "reason": "", "message": ""}
            ),
            deadline=deadline,
            what="state running",
        )
    except StaleAttempt:
        raise Stale() from None
    except (TransientError, PortalError) as exc:
        log(f"could not report running ({exc}); going on")
        return False
    reporter.set_interval(answer.get("interval"))
    return bool(answer.get("stop"))


def _fetch(spec: AgentSpec, client: PortalClient) -> Outcome | None:
    """With fetch_case, download the case source first; an Outcome only when that fails."""
    if not spec.fetch_case:
        return None
    from orchestration.agent.fetch import CaseFetchError, fetch_case  # tarfile: VMs only

    deadline = time.monotonic() + min(START_TIMEOUT, spec.final_timeout)
    try:
        spec.work_dir.mkdir(parents=True, exist_ok=True)
        files = with_retries(
            lambda: fetch_case(client, dest=spec.case_dir, scratch=spec.work_dir),
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


def _prepare(spec: AgentSpec) -> Outcome | None:
    """Render the case; an Outcome only when that fails."""
    try:
        spec.work_dir.mkdir(parents=True, exist_ok=True)
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
    archive = spec.case_path.is_dir()
    if archive:
        # the steps are over: the portal may give the run's cores to the next run while this
        # one sends its last points and archives its results
        try:
            client.post("heartbeat/", {"phase": "archiving", "resources": dict(reporter.resources)})
        except (TransientError, PortalError):
            pass
        except StaleAttempt:
            log("attempt superseded (409) while reporting the end: exiting")
            return EXIT_STALE
    supervisor.poll_dat()
    try:
        reporter.flush(deadline=deadline)
        message = outcome.message
        if archive and spec.archive == "upload":
            note = _upload_archive(spec, client, deadline=deadline)
            if note:
                message = f"{message}\n{note}".strip()
        body = {
            "state": outcome.state,
            "exit_code": outcome.exit_code,
            "reason": outcome.reason,
            "message": message,
            "solver_converged": outcome.solver_converged,
        }
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


def _upload_archive(spec: AgentSpec, client: PortalClient, *, deadline: float) -> str:
    """Build and PUT the archive; return a note for the final message ('' when all went in)."""
    from orchestration.agent.archive import build_archive  # tarfile: only when we upload

    dest = spec.work_dir / "result.tar.gz"
    max_bytes = int(spec.archive_max_mb * 1024 * 1024)
    try:
        notes = build_archive(spec.case_path, dest, max_bytes=max_bytes)
    except OSError as exc:
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
