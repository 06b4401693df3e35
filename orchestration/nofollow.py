"""File operations in a tree a tenant controls, that never follow its links (stdlib only).

A run's case directory belongs to the run's uid: code of the case may replace any file or
folder in it with a symbolic link (to `/etc/shadow`, to the portal's `.data/secrets.env`, to
another run's token) or a FIFO at any moment, also while the agent or the portal is working
there. Whoever works in that tree with more rights than the run's uid (the agent as root, the
portal) goes through this module: every path is resolved one component at a time from a
directory handle, each component opened with O_NOFOLLOW (a link anywhere on the way is an
error, not a detour), with O_NONBLOCK (a FIFO cannot hold the caller), and what is opened is
checked with fstat to be what was asked for (a regular file, a directory). Nothing is done by
path name after the check: the checked descriptor is what is read, written or listed. This is
what slurmstepd does for a job's output, with file descriptors in place of a change of user.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing is not imported at run time (every Slurm job starts an agent)
if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "UnsafePath",
    "create_file",
    "open_dir",
    "open_file",
    "read_file",
    "tree_usage",
    "unlink",
    "walk_files",
]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class UnsafePath(OSError):
    """A path in a tenant's tree is not what it should be: a link, a FIFO, a device, `..`."""


def _parts(relpath: str) -> list[str]:
    parts = [p for p in relpath.split("/") if p and p != "."]
    if not parts or any(p == ".." for p in parts) or relpath.startswith("/"):
        raise UnsafePath(f"{relpath!r} is not a path inside the case")
    return parts


def open_dir(path: str, *, dir_fd: int | None = None) -> int:
    """A descriptor of the directory `path`: absolute (its folders above are the caller's
    own, e.g. a run's case directory, whose parent only root may write) or, with `dir_fd`,
    relative to that directory and walked without following any link."""
    if dir_fd is None:
        fd = os.open(path, _DIR_FLAGS)
    else:
        fd = os.dup(dir_fd)
        for part in _parts(path):
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                os.close(fd)
                raise _explain(exc, path) from None
            os.close(fd)
            fd = nxt
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            raise UnsafePath(f"{path!r} is not a directory")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _explain(exc: OSError, path: str) -> OSError:
    # O_NOFOLLOW on a link: ELOOP; O_DIRECTORY on a link or a file: ENOTDIR
    if exc.errno in (40, 20):  # ELOOP, ENOTDIR
        return UnsafePath(f"{path!r}: a symbolic link or not a directory on the way")
    return exc


def _parent(dir_fd: int, relpath: str) -> tuple[int, str]:
    """(descriptor of the folder holding `relpath`, its last component): the caller closes it."""
    parts = _parts(relpath)
    parent = os.dup(dir_fd) if len(parts) == 1 else open_dir("/".join(parts[:-1]), dir_fd=dir_fd)
    return parent, parts[-1]


def open_file(dir_fd: int, relpath: str) -> int:
    """A read-only descriptor of the regular file `relpath` under `dir_fd`; UnsafePath when
    it, or any folder on the way, is a link, or it is not a regular file (a FIFO, a device,
    a socket): nothing blocks and nothing outside the tree is opened."""
    parent, name = _parent(dir_fd, relpath)
    try:
        try:
            fd = os.open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=parent)
        except OSError as exc:
            raise _explain(exc, relpath) from None
    finally:
        os.close(parent)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePath(f"{relpath!r} is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_file(dir_fd: int, relpath: str, *, max_bytes: int) -> bytes:
    """The bytes of the regular file `relpath` under `dir_fd` (open_file's checks); UnsafePath
    when it is larger than `max_bytes`."""
    fd = open_file(dir_fd, relpath)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise UnsafePath(f"{relpath!r} is larger than {max_bytes} bytes")
        chunks = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:  # it grew since fstat
            raise UnsafePath(f"{relpath!r} is larger than {max_bytes} bytes")
        return data
    finally:
        os.close(fd)


def unlink(dir_fd: int, relpath: str) -> bool:
    """Remove the entry `relpath` (a file, a link, a FIFO: never what a link points at) under
    `dir_fd`; False when it was not there. A folder on the way that is a link: UnsafePath."""
    try:
        parent, name = _parent(dir_fd, relpath)
    except FileNotFoundError:
        return False
    try:
        os.unlink(name, dir_fd=parent)
    except FileNotFoundError:
        return False
    finally:
        os.close(parent)
    return True


def create_file(
    dir_fd: int, relpath: str, *, mode: int = 0o644, owner: int | None = None, read: bool = False
) -> int:
    """A new, empty regular file at `relpath` under `dir_fd`, opened for writing (and reading
    with `read`): whatever the entry was (a file, a link, a FIFO) is removed first, and the
    file is created with O_EXCL | O_NOFOLLOW, so the descriptor is always a file of the
    caller's own making, never a host file a link pointed at (nor a hard link to one: that
    is the entry removed). `owner`: the uid (and gid) it is given, through the descriptor."""
    parent, name = _parent(dir_fd, relpath)
    try:
        try:
            os.unlink(name, dir_fd=parent)
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            raise UnsafePath(f"{relpath!r} is a directory") from None
        access = os.O_RDWR if read else os.O_WRONLY
        fd = os.open(name, access | os.O_CREAT | os.O_EXCL | _NOFOLLOW, mode, dir_fd=parent)
    finally:
        os.close(parent)
    try:
        os.set_blocking(fd, True)
        if owner is not None:
            os.fchown(fd, owner, owner)
    except BaseException:
        os.close(fd)
        raise
    return fd


MAX_DEPTH = 256  # folders nested deeper than this in a case are refused, not walked


def walk_files(top_fd: int) -> Iterator[tuple[str, int, os.stat_result]]:
    """(relative path, descriptor of its folder, lstat) of every regular file under `top_fd`,
    folders in sorted order, entered by descriptor (a folder swapped for a link while the
    walk runs is not entered); the folder descriptors are valid until the next item.
    UnsafePath for folders nested deeper than MAX_DEPTH."""
    for prefix, fd, name, st in _entries(top_fd, sort=True):
        if stat.S_ISREG(st.st_mode):
            yield prefix + name, fd, st


def tree_usage(top_fd: int) -> int:
    """Bytes the tree under `top_fd` takes on disk (allocated blocks, so a sparse file counts
    what it holds; a file with several links in the tree once), folders and links included,
    walked without following links. UnsafePath for folders nested deeper than MAX_DEPTH."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for _prefix, _fd, _name, st in _entries(top_fd, sort=False):
        if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if key in seen:
                continue
            seen.add(key)
        total += st.st_blocks * 512
    return total


def _entries(top_fd: int, *, sort: bool) -> Iterator[tuple[str, int, str, os.stat_result]]:
    """(folder prefix, folder descriptor, name, lstat) of every entry under `top_fd`, depth
    first, one open descriptor per level of the folder being listed."""
    yield from _level(top_fd, "", 0, sort)


def _level(
    dir_fd: int, prefix: str, depth: int, sort: bool
) -> Iterator[tuple[str, int, str, os.stat_result]]:
    if depth > MAX_DEPTH:
        raise UnsafePath(f"folders nest deeper than {MAX_DEPTH} levels at {prefix[:200]!r}")
    try:
        with os.scandir(dir_fd) as listing:
            names = [entry.name for entry in listing]
    except OSError:
        return
    if sort:
        names.sort()
    folders = []
    for name in names:
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            continue
        yield prefix, dir_fd, name, st
        if stat.S_ISDIR(st.st_mode):
            folders.append(name)
    for name in folders:
        try:
            sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError:  # gone, or swapped for a link meanwhile: not followed
            continue
        try:
            yield from _level(sub, f"{prefix}{name}/", depth + 1, sort)
        finally:
            os.close(sub)
