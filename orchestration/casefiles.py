"""A case's files: which are templates, walking a case tree safely, copying it rendered.

Stdlib only and free of Jinja: a run agent given its case already rendered by the portal
(`rendered` in run.json) copies it with these and never imports the template engine, which
is the largest part of an agent's start-up inside every Slurm job.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "MAX_TEMPLATE_BYTES",
    "RenderError",
    "copy_case",
    "is_binary_file",
    "read_template",
    "walk",
]

MAX_TEMPLATE_BYTES = 20 * 1024 * 1024


class RenderError(ValueError):
    """A template or expression could not be parsed or evaluated; the message says where."""


def is_binary_file(path: Path) -> bool:
    """True for gzip files and files with NUL bytes or invalid UTF-8 in their first 8 KiB."""
    with path.open("rb") as fh:
        head = fh.read(8192)
    if head.startswith(b"\x1f\x8b") or b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(head) - 4  # a multi-byte char cut at the boundary is fine
    return False


def read_template(path: Path) -> str | None:
    """The text of `path` if it is a renderable text file containing `{{`, else None."""
    if path.stat().st_size > MAX_TEMPLATE_BYTES or is_binary_file(path):
        return None
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            text = fh.read()
    except UnicodeDecodeError:
        return None
    return text if "{{" in text else None


def walk(root: Path) -> list[tuple[Path, str]]:
    """Every regular file under `root` as (path, posix relative path); symlinks are an error."""
    found: list[tuple[Path, str]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise RenderError(f"{rel}: symbolic links are not allowed in a case")
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise RenderError(f"{rel}: only regular files and directories are allowed")
            if stat.S_ISREG(mode):
                found.append((path, rel))
    return found


def copy_case(src: Path, dst: Path, text_of: Callable[[Path, str], str | None]) -> list[str]:
    """Copy the case tree `src` to `dst`; a file for which `text_of(path, rel)` gives a text
    is written as that text (its template rendered), the others are copied as they are.
    Return the written texts' relative paths.

    `dst` must not exist or be empty. Symbolic links and special files in `src` are errors,
    found before anything is written.
    """
    src, dst = Path(src), Path(dst)
    if not src.is_dir():
        raise RenderError(f"case directory {src} does not exist")
    if dst.exists() and any(dst.iterdir()):
        raise RenderError(f"destination {dst} is not empty")
    files = walk(src)  # validates the whole tree before writing anything
    dst.mkdir(parents=True, exist_ok=True)
    for dirpath, dirnames, _ in os.walk(src, followlinks=False):
        for name in dirnames:
            (dst / Path(dirpath).relative_to(src) / name).mkdir(exist_ok=True)
    written: list[str] = []
    for path, rel in files:
        target = dst / rel
        text = text_of(path, rel)
        if text is None:
            shutil.copy2(path, target, follow_symlinks=False)
            continue
        with target.open("w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        shutil.copystat(path, target, follow_symlinks=False)
        written.append(rel)
    return sorted(written)
