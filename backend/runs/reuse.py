"""Reused runs across a study's deletion (docs/reuse.md).

A reused run shows its source run's series, objectives and archive by pointer: nothing is
copied. When the source's study is deleted, each source whose results other studies' runs
still show hands them over to one of those runs (its heir) before the rows go: the heir
takes the series and log (re-keyed, not copied), the archive and the results directory
(moved on disk under the heir's id), and the other reusers point to the heir. The user of
the deleted study loses nothing another study still shows.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction

from studies.models import Run, Study
from studies.transitions import runs_hand_over_reused
from telemetry.models import LogChunk, SeriesChunk

log = logging.getLogger(__name__)


def study_deleting(*, study: Study) -> None:
    """Before a study's runs are deleted (Hook.STUDY_DELETING, in studies.services.study_delete's
    transaction): its reused results handed over to their heirs, then its runs' series and log
    deleted, as two sets (what was handed over is no longer theirs); the study and its runs then
    go as sets too."""
    pairs = runs_hand_over_reused(study=study)
    if pairs:
        _series_hand_over(pairs)
        moves = _files_hand_over(pairs)
        transaction.on_commit(lambda: _move_files(moves))
    for model in (SeriesChunk, LogChunk):
        model.objects.filter(run__study=study).delete()


def _series_hand_over(pairs: list[tuple[str, str]]) -> None:
    """The sources' series and log chunks re-keyed to their heirs: one UPDATE each."""
    values = ", ".join(["(%s::uuid, %s::uuid)"] * len(pairs))
    flat = [x for pair in pairs for x in pair]
    with connection.cursor() as cur:
        for model in (SeriesChunk, LogChunk):
            cur.execute(
                f"UPDATE {model._meta.db_table} c SET run_id = v.heir"
                f" FROM (VALUES {values}) AS v(src, heir) WHERE c.run_id = v.src",
                flat,
            )


def _files_hand_over(pairs: list[tuple[str, str]]) -> list[tuple[Path, Path]]:
    """The heirs' archive and results paths rewritten from the source's directories (under
    RUNS_DIR and ARCHIVE_DIR, named by run id) to their own; the moves to make on disk once
    the deletion commits (the source's files are then not deleted with it: they are gone
    from under its id)."""
    moves: list[tuple[Path, Path]] = []
    for source, heir in pairs:
        run = Run.objects.only("archive_path", "results_dir").get(pk=heir)
        changed = []
        for base in (Path(settings.RUNS_DIR), Path(settings.ARCHIVE_DIR)):
            old, new = base / source, base / heir
            moves.append((old, new))
            for name in ("archive_path", "results_dir"):
                value = getattr(run, name)
                if value and Path(value).is_relative_to(old):
                    setattr(run, name, str(new / Path(value).relative_to(old)))
                    changed.append(name)
        if changed:
            run.save(update_fields=sorted(set(changed)))
    return moves


def _move_files(moves: list[tuple[Path, Path]]) -> None:
    for old, new in moves:
        if old.is_dir() and not new.exists():
            try:
                os.replace(old, new)
            except OSError as exc:  # the heir then shows no archive; its series are kept
                log.warning("cannot move %s to %s: %s", old, new, exc)
