"""What a case will do, read from its files (orchestration.case.caseinspect): for an upload when
it is stored, for a template when it is asked for. Also the check that a series a study
names is one its case can send."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from django.conf import settings

from core.exceptions import ApplicationError, ErrorCode
from orchestration.case import caseinspect

_CACHE: dict[tuple[Any, ...], dict[str, Any]] = {}


def case_inspect(*, path: str | Path) -> dict[str, Any]:
    """The inspection of the case at `path` as JSON (docs/api.md, "Case inspection")."""
    etc = Path(settings.WINDTUNNEL["OPENFOAM_DIR"]) / "etc"
    inspection = caseinspect.inspect_case(path, etc_dir=str(etc) if etc.is_dir() else None)
    return inspection.as_json()


def template_inspection(*, path: str | Path) -> dict[str, Any]:
    """A template's inspection, read again only when one of its files changes."""
    root = Path(path)
    if not root.is_dir():
        return {}
    key: tuple[Any, ...] = (str(root),)
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            st = os.stat(os.path.join(dirpath, name))
            key += ((dirpath, name, st.st_size, st.st_mtime_ns),)
    cached = _CACHE.get(key)
    if cached is None:
        if len(_CACHE) > 32:
            _CACHE.clear()
        cached = _CACHE[key] = case_inspect(path=root)
    return cached


def series_check(*, inspection: dict[str, Any], name: str, field: str) -> None:
    """A 400 naming `field` and the closest series when the inspected case cannot send
    series `name`; nothing to check when the case could not be (wholly) inspected: its
    reader may have missed what OpenFOAM would read."""
    if not inspection or "series" not in inspection or inspection.get("errors"):
        return
    if caseinspect.series_known(inspection, name):
        return
    offered = list(inspection.get("series") or [])
    close = difflib.get_close_matches(name, offered, n=3, cutoff=0.5)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    listed = ", ".join(offered[:40]) + (", …" if len(offered) > 40 else "")
    raise ApplicationError(
        f"{field}: the case writes no series named {name!r}; {hint}"
        f"its series are: {listed or '(none: its controlDict has no function objects that write series)'}",
        code=ErrorCode.UNKNOWN_SERIES,
        field=field,
        details={"close_matches": close, "series": offered},
    )
