"""A case's files: which are templates, walking a case tree safely, copying it rendered.

Stdlib only and free of Jinja: a run agent given its case already rendered by the portal
(`rendered` in run.json) copies it with these and never imports the template engine, which
is the largest part of an agent's start-up inside every Slurm job. For the same reason this
module keeps to `os` (no pathlib, no shutil: their imports cost every job ~10 ms); it takes
str or path-like paths and gives str paths.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing is not imported at run time (every Slurm job starts an agent)
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "MAX_TEMPLATE_BYTES",
    "RenderError",
    "copy_case",
    "is_binary_file",
    "read_template",
    "walk",
]

MAX_TEMPLATE_BYTES = 20 * 1024 * 1024
_COPY_CHUNK = 1 << 20


class RenderError(ValueError):
    """A template or expression could not be parsed or evaluated; the message says where."""


def is_binary_file(path: str | os.PathLike[str]) -> bool:
    """True for gzip files and files with NUL bytes or invalid UTF-8 in their first 8 KiB."""
    with open(path, "rb") as fh:
        head = fh.read(8192)
    if head.startswith(b"\x1f\x8b") or b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(head) - 4  # a multi-byte char cut at the boundary is fine
    return False


def read_template(path: str | os.PathLike[str]) -> str | None:
    """The text of `path` if it is a renderable text file containing `{{`, else None."""
    if os.stat(path).st_size > MAX_TEMPLATE_BYTES or is_binary_file(path):
        return None
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            text = fh.read()
    except UnicodeDecodeError:
        return None
    return text if "{{" in text else None


def walk(root: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """Every regular file under `root` as (path, posix relative path); symlinks are an error."""
    root = os.fspath(root)
    found: list[tuple[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        base = os.path.relpath(dirpath, root)
        for name in sorted(dirnames + filenames):
            path = os.path.join(dirpath, name)
            rel = name if base == "." else f"{base}/{name}".replace(os.sep, "/")
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                raise RenderError(f"{rel}: symbolic links are not allowed in a case")
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise RenderError(f"{rel}: only regular files and directories are allowed")
            if stat.S_ISREG(mode):
                found.append((path, rel))
    return found


def copy_case(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    text_of: Callable[[str, str], str | None],
) -> list[str]:
    """Copy the case tree `src` to `dst`; a file for which `text_of(path, rel)` gives a text
    is written as that text (its template rendered), the others are copied as they are.
    Return the written texts' relative paths. Files keep their mode and times.

    `dst` must not exist or be empty. Symbolic links and special files in `src` are errors,
    found before anything is written.
    """
    src, dst = os.fspath(src), os.fspath(dst)
    if not os.path.isdir(src):
        raise RenderError(f"case directory {src} does not exist")
    if os.path.exists(dst) and os.listdir(dst):
        raise RenderError(f"destination {dst} is not empty")
    files = walk(src)  # validates the whole tree before writing anything
    os.makedirs(dst, exist_ok=True)
    for dirpath, dirnames, _ in os.walk(src, followlinks=False):
        rel = os.path.relpath(dirpath, src)
        for name in dirnames:
            target = os.path.join(dst, name) if rel == "." else os.path.join(dst, rel, name)
            os.makedirs(target, exist_ok=True)
    written: list[str] = []
    for path, rel in files:
        target = os.path.join(dst, rel)
        text = text_of(path, rel)
        if text is None:
            _copy_file(path, target)
        else:
            with open(target, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
            written.append(rel)
        _copy_stat(path, target)
    return sorted(written)


def _copy_file(src: str, dst: str) -> None:
    """The bytes of `src` into a new `dst` (in the kernel where it can: copy_file_range)."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        size = os.fstat(fin.fileno()).st_size
        copy_range = getattr(os, "copy_file_range", None)
        if copy_range is not None:
            try:
                copied = 0
                while copied < size and (n := copy_range(fin.fileno(), fout.fileno(), size)):
                    copied += n
                if copied >= size:
                    return
            except OSError:  # another filesystem or kernel that cannot: plain copying
                pass
            fin.seek(0)
            fout.seek(0)
            fout.truncate()
        while chunk := fin.read(_COPY_CHUNK):
            fout.write(chunk)


def _copy_stat(src: str, dst: str) -> None:
    """Mode bits and access/modification times of `src` onto `dst` (what shutil.copystat
    copies that matters for a case: executable scripts stay executable)."""
    st = os.stat(src)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.chmod(dst, stat.S_IMODE(st.st_mode))
