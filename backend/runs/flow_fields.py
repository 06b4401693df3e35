"""A run's flow fields: the artifact its agent wrote after the run completed
(orchestration/results/fields, docs/agent-protocol.md#flow-fields), read from the run's
directory (runs whose files the portal reads) or from the start of its result archive, and
checked there (orchestration.results.fields.reading)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestration.results.fields.reading import (
    artifact_in_case,
    extracted_from_archive,
    load_artifact,
)
from studies.choices import TERMINAL_STATES
from studies.models import Run


def run_fields(*, run: Run) -> dict[str, Any] | None:
    """The run's checked flow-field artifact, or None (none written, not over, malformed)."""
    if not run.archive_path or not Path(run.archive_path).is_file():
        if run.state not in TERMINAL_STATES or run.results_at is None or not run.results_dir:
            return None  # not over, or its agent may still be writing
        return artifact_in_case(run.results_dir)
    path = extracted_from_archive(Path(run.archive_path))
    if path is None:
        return None
    try:
        stat = path.stat()
    except OSError:
        return None
    return load_artifact(str(path), stat.st_mtime, stat.st_size)
