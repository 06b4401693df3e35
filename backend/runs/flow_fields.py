"""A run's flow fields: the artifact of its final fields on a plane and Cp
(orchestration/results/fields, docs/agent-protocol.md#flow-fields).

A run whose agent uploads its results made it before the upload: it is read from the start
of the archive. A run whose folder the portal reads itself (the local backend) is not held
in its slot for it: the artifact is made when someone first wants it, by a job that runs the
converter as the run's uid in the run's sandbox (the case is the tenant's) and keeps what it
writes in the portal's own folder, beside the run's archive. Both are checked before
anything of them is served (orchestration.results.fields.reading).
"""

from __future__ import annotations

import fcntl
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.cache import cache

from core import jobs
from core.jobs import Job
from orchestration.agent.confined import ArchiveError, case_fields
from orchestration.agent.sandbox import SandboxError
from orchestration.results.fields.reading import extracted_from_archive, load_artifact
from runs.archives import run_sandbox
from studies.choices import RunState
from studies.models import Run

log = logging.getLogger(__name__)
FIELDS_TIMEOUT = 600.0  # seconds the converter may take on one case
ERROR_MAX = 2000


@dataclass(frozen=True)
class RunFields:
    """The artifact (None when there is none), and whether it is being made now."""

    artifact: dict[str, Any] | None
    preparing: bool = False
    problem: str = ""  # why a completed run has none, when making it failed


def run_fields(*, run: Run, make: bool = True) -> RunFields:
    """The run's checked flow-field artifact. For a completed run whose folder the portal
    reads and whose artifact is not made yet, `make` asks the worker to make it now (once)
    and the answer says it is being prepared."""
    if not run.results_dir:  # its agent uploaded its results, the artifact among them
        if run.archive_path and Path(run.archive_path).is_file():
            path = extracted_from_archive(Path(run.archive_path))
            return RunFields(_load(path) if path is not None else None)
        return RunFields(None)
    if run.state != RunState.COMPLETED or run.results_at is None:
        return RunFields(None)  # not over (or its agent may still be writing), or none made
    target, error = _paths(run)
    if target.is_file():
        return RunFields(_load(target))
    if error.is_file():
        return RunFields(None, problem=error.read_text(errors="replace")[:ERROR_MAX])
    if make and cache.add(_asked_key(run), 1, timeout=int(FIELDS_TIMEOUT)):
        jobs.enqueue(Job.MAKE_FIELDS, str(run.pk), run.attempt)
    return RunFields(None, preparing=True)


def run_make_fields(*, run_id: str, attempt: int) -> None:
    """Make the flow-field artifact of a completed run whose folder the portal reads: the
    converter runs as the run's uid in its sandbox, writing to a file of the portal's; a
    failure is kept, with its reason, for the run page to say."""
    run = Run.objects.select_related("study").filter(pk=run_id, attempt=attempt).first()
    if run is None or run.state != RunState.COMPLETED or not run.results_dir:
        return
    target, error = _paths(run)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / "fields.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one maker at a time; the next finds it made
        if target.is_file() or error.is_file():
            return
        fd, part = tempfile.mkstemp(dir=target.parent, suffix=".part")
        try:
            sandbox = run_sandbox(run)
            said = case_fields(
                sandbox,
                case=run.results_dir,
                out_fd=fd,
                extra_fields=tuple(str(f) for f in (run.study.spec or {}).get("fields") or ()),
                timeout=FIELDS_TIMEOUT,
            )
            os.replace(part, target)
            log.info("flow fields of run %s: %s", run.pk, said.splitlines()[:1])
        except (ArchiveError, SandboxError, OSError) as exc:
            Path(part).unlink(missing_ok=True)
            error.write_text(f"flow fields: not made: {exc}"[:ERROR_MAX])
        finally:
            os.close(fd)
            cache.delete(_asked_key(run))


def _paths(run: Run) -> tuple[Path, Path]:
    folder = Path(settings.ARCHIVE_DIR) / str(run.pk)
    return (
        folder / f"attempt-{run.attempt}.fields.json",
        folder / f"attempt-{run.attempt}.fields.error",
    )


def _asked_key(run: Run) -> str:
    return f"windtunnel:fields-asked:{run.pk}:{run.attempt}"


def _load(path: Path) -> dict[str, Any] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return load_artifact(str(path), stat.st_mtime, stat.st_size)
