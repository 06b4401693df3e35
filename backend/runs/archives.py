"""A run's files: the result archive (uploaded by its agent, or built by the portal from a
run directory it reads itself), the case source for agents on other machines, and the
files of deleted runs."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import IO

from django.conf import settings

from core.exceptions import ApplicationError, Conflict, ErrorCode, NotFound, StaleAttempt
from orchestration.agent.confined import ArchiveError, archive_case, case_owner, case_vtk
from orchestration.agent.sandbox import SANDBOX_UID_BASE, Sandbox, SandboxError
from orchestration.environment import step_environment
from studies.choices import STARTED_STATES, TERMINAL_STATES, RunState
from studies.models import Run

log = logging.getLogger(__name__)
ARCHIVE_TIMEOUT = 600.0  # seconds a download waits for a run's archive to be made
VTK_TIMEOUT = 600.0  # seconds foamToVTK may take on one case, before its archive is made


def run_store_archive(*, run: Run, attempt: int, stream: IO[bytes], max_bytes: int) -> int:
    """Save the agent's result archive for this attempt; returns its size."""
    current = Run.objects.filter(pk=run.pk).values_list("attempt", flat=True).first()
    if current != attempt:
        raise StaleAttempt()
    target_dir = Path(settings.ARCHIVE_DIR) / str(run.pk)
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / f"attempt-{attempt}.tar.gz"
    tmp = target.with_suffix(".part")
    size = 0
    with tmp.open("wb") as fh:
        while chunk := stream.read(1024 * 1024):
            size += len(chunk)
            if size > max_bytes:
                fh.close()
                tmp.unlink(missing_ok=True)
                raise ApplicationError(
                    f"the archive is larger than {max_bytes // (1024 * 1024)} MB",
                    code=ErrorCode.UPLOAD,
                )
            fh.write(chunk)
    tmp.replace(target)
    Run.objects.filter(pk=run.pk, attempt=attempt).update(
        archive_path=str(target), archive_bytes=size
    )
    return size


def run_archive_file(*, run: Run) -> Path | None:
    """The run's result archive: the one its agent uploaded, or, for a run whose files the
    portal reads itself (`results_dir`), one made from them now and kept for later
    downloads. None when there is none (yet).

    The run's directory is the tenant's (its case may have left links to host files there):
    the portal does not read it. The archive is made by the uid that owns the case, in the
    case sandbox, into a file the portal made (orchestration/agent/confined.py)."""
    if run.archive_path and Path(run.archive_path).is_file():
        return Path(run.archive_path)
    if run.state not in TERMINAL_STATES or not run.results_dir or run.results_at is None:
        return None  # not over, or its agent may still be writing (its final report is due)
    case = run.results_dir
    target_dir = Path(settings.ARCHIVE_DIR) / str(run.pk)
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / f"attempt-{run.attempt}.tar.gz"
    fd, name = tempfile.mkstemp(dir=target_dir, suffix=".part")
    try:
        with tempfile.TemporaryDirectory(prefix="vtk-home-") as home:
            os.chmod(home, 0o755)  # the run's uid reads its OpenFOAM settings there
            sandbox = run_sandbox(run, home=home)
            _make_vtk(run, sandbox, home=home, log_dir=target_dir)
            archive_case(
                sandbox,
                case=case,
                out_fd=fd,
                max_bytes=settings.WINDTUNNEL["ARCHIVE_MAX_MB"] * 1024 * 1024,
                timeout=ARCHIVE_TIMEOUT,
            )
        os.close(fd)
        fd = -1
        os.replace(name, target)
    except (ArchiveError, SandboxError, OSError) as exc:
        Path(name).unlink(missing_ok=True)
        log.warning("cannot archive run %s from %s: %s", run.pk, case, exc)
        return None
    finally:
        if fd >= 0:
            os.close(fd)
    size = target.stat().st_size
    Run.objects.filter(pk=run.pk, attempt=run.attempt).update(
        archive_path=str(target), archive_bytes=size
    )
    run.archive_path, run.archive_bytes = str(target), size
    return target


def run_sandbox(run: Run, *, home: str = "") -> Sandbox:
    """The sandbox of a finished run whose folder the portal reads, attached to its case:
    steps run as the uid that made the case (or, for a case inherited from a reused run,
    its own), seeing only the case (and `home`, when given)."""
    owner = case_owner(run.results_dir)
    if owner is None:
        raise SandboxError(f"the run's folder {run.results_dir} is gone")
    mode = "off" if settings.WINDTUNNEL["CASE_SANDBOX"] == "off" else "bwrap"
    sandbox = Sandbox(
        {"mode": mode}, run_id=str(run.pk), uid=owner if owner >= SANDBOX_UID_BASE else None
    )
    sandbox.attach(case=run.results_dir, home=home)
    return sandbox


def _make_vtk(run: Run, sandbox: Sandbox, *, home: str, log_dir: Path) -> None:
    """foamToVTK's files for ParaView in a completed run's case, made as its archive is
    (the run's slot was not held for them): with the run's own OpenFOAM environment (its
    run.json, the portal's file beside the case), system operations off. Best effort: an
    archive without them is still an archive (the log says why)."""
    if run.state != RunState.COMPLETED:
        return
    try:
        spec = json.loads((Path(run.results_dir).parent / "run.json").read_text())
        extra = {str(k): str(v) for k, v in (spec.get("env") or {}).items()}
    except (OSError, ValueError, AttributeError):
        extra = {}
    env = step_environment(os.environ, extra, home=home)
    if sandbox.confines_files:
        env["HOME"] = sandbox.home_dir(home)
    with open(log_dir / f"attempt-{run.attempt}.foamToVTK.log", "wb") as out:
        try:
            case_vtk(
                sandbox, case=run.results_dir, env=env, log_fd=out.fileno(), timeout=VTK_TIMEOUT
            )
        except ArchiveError as exc:
            log.warning("no VTK files for run %s: %s", run.pk, exc)


def run_case_archive(*, run: Run, attempt: int) -> Path:
    """A tar.gz of the run's case source, for agents that cannot read the portal's files
    (VMs): plain files and directories only, symlinks left out. The caller deletes it."""
    if run.attempt != attempt:
        raise StaleAttempt()
    if run.state not in STARTED_STATES:
        raise Conflict(f"run {run.pk} is {run.state}: nothing to fetch")
    source = Path(run.study.case_dir)
    if not source.is_dir():
        raise NotFound("this run's case source is gone")
    fd, name = tempfile.mkstemp(prefix="case-", suffix=".tar.gz", dir=settings.DATA_DIR)
    os.close(fd)
    target = Path(name)
    with tarfile.open(target, mode="w:gz", compresslevel=1) as tar:
        for path in sorted(source.rglob("*")):
            if path.is_symlink() or not (path.is_file() or path.is_dir()):
                continue
            tar.add(path, arcname=str(path.relative_to(source)), recursive=False)
    return target


def run_files_delete(*, run_ids: list[str]) -> None:
    """The run directories and result archives of deleted runs (ids only: the rows are gone)."""
    for run_id in run_ids:
        for base in (settings.RUNS_DIR, settings.ARCHIVE_DIR):
            shutil.rmtree(Path(base) / str(run_id), ignore_errors=True)
