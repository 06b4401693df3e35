"""A case folder packed as the .tar.gz the portal's upload takes."""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path
from typing import IO

#: folders no case needs: version control and Python's caches
SKIPPED = frozenset({".git", ".hg", ".svn", "__pycache__"})


def pack_case(folder: Path) -> tuple[str, IO[bytes]]:
    """The folder as `<name>.tar.gz` (its files under `<name>/`, in a stable order), in a
    temporary file the caller closes (it is deleted then)."""
    folder = folder.resolve()
    out = tempfile.TemporaryFile()  # noqa: SIM115 — handed to the caller, who closes it
    try:
        with tarfile.open(fileobj=out, mode="w:gz") as tar:
            tar.add(folder, arcname=folder.name, recursive=False)
            for path in _walk(folder):
                tar.add(path, arcname=f"{folder.name}/{path.relative_to(folder)}", recursive=False)
    except BaseException:
        out.close()
        raise
    out.seek(0)
    return f"{folder.name}.tar.gz", out


def _walk(folder: Path) -> list[Path]:
    found: list[Path] = []
    for path in sorted(folder.iterdir()):
        if path.name in SKIPPED:
            continue
        found.append(path)
        if path.is_dir() and not path.is_symlink():
            found.extend(_walk(path))
    return found
