"""The result archive: what a user needs from a finished case, under a size budget.

A case directory is the tenant's: it may hold links to host files and FIFOs. The archive is
made by the run's own uid inside the run's sandbox (`python3 -m orchestration.agent.archive`,
see `archive_argv`), which writes the tar.gz to its standard output; whoever asked (the
agent, or the portal for a run whose directory it reads) gives it a file of its own to write
into and never opens a path of the case. The walk itself follows no link either
(orchestration/nofollow.py): links and special files are left out, a file swapped
while it is read is read through the descriptor that was checked.

Stdlib only, and only Python 3.11's: the sandbox runs it with the system's python3.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import sys
import tarfile

from orchestration import nofollow
from orchestration.agent import PROVENANCE_FILE, README_FILE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path
    from typing import IO

__all__ = [
    "MANIFEST",
    "archive_argv",
    "build_archive",
    "latest_time_dir",
    "main",
    "read_notes",
    "time_names",
    "write_archive",
]

POLYMESH_INLINE_LIMIT = 20 * 1024 * 1024
MANIFEST = "windtunnel-archive.txt"
NOTES_PREFIX = "windtunnel-archive-notes: "
# the artifact the agent's flow-field step writes (orchestration/results/fields.py): first in
# the archive, where the portal looks for it
FIELDS_DIR = "windtunnel"

_File = tuple[str, int, int]  # (path relative to the case, size, inode)


def _is_time(name: str) -> bool:
    try:
        value = float(name)
    except ValueError:
        return False
    return value == value and abs(value) != float("inf")  # not "nan" nor "inf"


def latest_time_dir(case: Path) -> Path | None:
    """The largest numeric directory of the case (reconstructed results), if any."""
    fd = nofollow.open_dir(str(case))
    try:
        name = _latest_time(fd)
    finally:
        os.close(fd)
    return case / name if name is not None else None


def time_names(case_fd: int) -> list[str]:
    """The case's time folders (top level, as reconstructed), earliest first (also what a
    later attempt may go on from: orchestration/agent/resume.py)."""
    times = [n for n, st in _top(case_fd).items() if stat.S_ISDIR(st.st_mode) and _is_time(n)]
    return sorted(times, key=float)


def _latest_time(case_fd: int) -> str | None:
    times = time_names(case_fd)
    return times[-1] if times else None


def _top(case_fd: int) -> dict[str, os.stat_result]:
    out = {}
    with os.scandir(case_fd) as entries:
        for entry in entries:
            try:
                out[entry.name] = os.stat(entry.name, dir_fd=case_fd, follow_symlinks=False)
            except OSError:
                continue
    return out


def _tree(dir_fd: int, prefix: str, name: str, kind: int) -> list[_File]:
    """The regular files of the entry `name` of the folder `dir_fd` (the file itself, or
    every file of the folder), as paths under `prefix`."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return []
    if kind == stat.S_IFREG:
        return [(prefix + name, st.st_size, st.st_ino)] if stat.S_ISREG(st.st_mode) else []
    if not stat.S_ISDIR(st.st_mode):
        return []
    try:
        fd = nofollow.open_dir(name, dir_fd=dir_fd)
    except OSError:
        return []
    try:
        return [
            (f"{prefix}{name}/{p}", s.st_size, s.st_ino) for p, _d, s in nofollow.walk_files(fd)
        ]
    finally:
        os.close(fd)


def _candidates(case_fd: int) -> list[tuple[str, list[tuple[str, list[_File]]]]]:
    """(label, [(path, its files)]) in priority order: earlier groups are kept when the
    budget is short."""
    top = _top(case_fd)
    logs = sorted(n for n, st in top.items() if n.startswith("log.") and stat.S_ISREG(st.st_mode))
    constant = -1
    if "constant" in top and stat.S_ISDIR(top["constant"].st_mode):
        try:
            constant = nofollow.open_dir("constant", dir_fd=case_fd)
        except OSError:
            pass
    try:
        constant_rest = (
            sorted(n for n in _top(constant) if n != "polyMesh") if constant >= 0 else []
        )
        times = time_names(case_fd)
        latest = times[-1] if times else None
        # the initial conditions as rendered for the run (what a rerun starts from)
        initial = [n for n in [*times[:1], "0.orig"] if n != latest]
        F, D = stat.S_IFREG, stat.S_IFDIR
        # (label, [(folder, prefix, name, kind)])
        groups: list[tuple[str, list[tuple[int, str, str, int]]]] = [
            # first: the portal reads the flow-field artifact from the archive's start
            ("flow fields", [(case_fd, "", FIELDS_DIR, D)]),
            ("provenance", [(case_fd, "", PROVENANCE_FILE, F)]),  # how the run was made
            ("README", [(case_fd, "", README_FILE, F)]),  # and how to rerun it by hand
            ("logs", [(case_fd, "", n, F) for n in logs]),
            ("system", [(case_fd, "", "system", D)]),
            ("constant", [(constant, "constant/", n, -1) for n in constant_rest]),
            ("initial conditions", [(case_fd, "", n, D) for n in initial]),
            ("postProcessing", [(case_fd, "", "postProcessing", D)]),
        ]
        if latest is not None:
            groups.append((f"time {latest}", [(case_fd, "", latest, D)]))
        if constant >= 0:
            groups.append(("constant/polyMesh", [(constant, "constant/", "polyMesh", D)]))
        groups.append(("VTK", [(case_fd, "", "VTK", D)]))  # foamToVTK's, for ParaView
        out = []
        for label, paths in groups:
            found = []
            for folder, prefix, name, kind in paths:
                if kind == -1:  # either: constant's files and folders alike
                    files = _tree(folder, prefix, name, F) or _tree(folder, prefix, name, D)
                else:
                    files = _tree(folder, prefix, name, kind)
                if files:
                    found.append((prefix + name, files))
            out.append((label, found))
        return out
    finally:
        if constant >= 0:
            os.close(constant)


class _Exactly(io.RawIOBase):
    """`size` bytes of a descriptor: what tar's header promised, even when the file shrank
    (zeros) or grew (cut) since it was measured."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.left = fd, size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        want = min(len(buffer), self.left)
        if want <= 0:
            return 0
        data = os.read(self.fd, want) or bytes(want)
        buffer[: len(data)] = data
        self.left -= len(data)
        return len(data)


def _add(tar: tarfile.TarFile, case_fd: int, rel: str, *, tail: int | None = None) -> bool:
    """Add the regular file `rel` (opened without following links); False when it is gone
    or is no longer a regular file."""
    try:
        fd = nofollow.open_file(case_fd, rel)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        size = st.st_size
        if tail is not None and size > tail:
            os.lseek(fd, size - tail, os.SEEK_SET)
            size = tail
        info = tarfile.TarInfo(rel)
        info.size, info.mtime, info.mode = size, int(st.st_mtime), 0o644
        tar.addfile(info, io.BufferedReader(_Exactly(fd, size)))
    finally:
        os.close(fd)
    return True


def write_archive(case_fd: int, out: IO[bytes], *, max_bytes: int) -> list[str]:
    """Write the tar.gz (paths relative to the case) to `out`, a stream; return notes on
    what was left out.

    The budget is counted on uncompressed sizes, so the archive always stays under it.
    constant/polyMesh goes in only when it is under 20 MB. A log too large for the budget
    goes in as its tail.
    """
    notes: list[str] = []
    budget = max_bytes - 64 * 1024  # room for tar headers and the manifest
    # fast: on an upload it sits in the run's slot
    with (
        gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1) as packed,
        tarfile.open(fileobj=packed, mode="w|") as tar,
    ):
        for label, paths in _candidates(case_fd):
            if label == "constant/polyMesh" and paths:
                if sum(size for _, size, _ in paths[0][1]) > POLYMESH_INLINE_LIMIT:
                    notes.append("constant/polyMesh left out (larger than 20 MB)")
                    continue
            for rel, files in paths:
                size = sum(s for _, s, _ in files)
                if size <= budget:
                    for path, file_size, _ in files:
                        if _add(tar, case_fd, path):
                            budget -= file_size
                elif label == "logs" and budget > 4096:
                    tail = budget // 2
                    _add(tar, case_fd, rel, tail=tail)
                    budget -= tail
                    notes.append(f"{rel} truncated to its last {tail // 1024} KiB")
                else:
                    notes.append(f"{rel} left out ({size} bytes over the archive budget)")
        if notes:
            data = ("\n".join(notes) + "\n").encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return notes


def build_archive(case: Path, dest: Path, *, max_bytes: int) -> list[str]:
    """write_archive of the case folder `case` into the new file `dest` (in this process:
    for a case of the caller's own, e.g. a test's; a tenant's case is archived in its
    sandbox, `archive_argv`)."""
    fd = nofollow.open_dir(str(case))
    try:
        with open(dest, "wb") as out:
            return write_archive(fd, out, max_bytes=max_bytes)
    finally:
        os.close(fd)


def archive_argv(python: str, package_root: str, *, max_bytes: int) -> list[str]:
    """The command that archives the case in the current folder to its standard output
    (run in the sandbox, from the case: `package_root` is where the sandbox shows the folder
    holding `orchestration/`); its last line on standard error is NOTES_PREFIX + the notes
    as JSON."""
    program = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from orchestration.agent.archive import main; sys.exit(main(sys.argv[2:]))"
    )
    return [python, "-I", "-B", "-c", program, package_root, "--max-bytes", str(max_bytes)]


def main(argv: Sequence[str]) -> int:
    """Archive the case in the current folder to standard output (archive_argv)."""
    if len(argv) != 2 or argv[0] != "--max-bytes" or not argv[1].isdigit():
        print("usage: archive --max-bytes N (from the case folder)", file=sys.stderr)
        return 2
    fd = nofollow.open_dir(".")  # the case: the sandbox's working folder, not a path name
    try:
        notes = write_archive(fd, sys.stdout.buffer, max_bytes=int(argv[1]))
    finally:
        os.close(fd)
    sys.stdout.buffer.flush()
    print(NOTES_PREFIX + json.dumps(notes), file=sys.stderr)
    return 0


def read_notes(stderr: bytes) -> list[str] | None:
    """The notes an archive command printed last (None: it printed none: it failed)."""
    for line in reversed(stderr.decode(errors="replace").splitlines()):
        if line.startswith(NOTES_PREFIX):
            try:
                notes = json.loads(line[len(NOTES_PREFIX) :])
            except ValueError:
                return None
            return [str(n) for n in notes] if isinstance(notes, list) else None
    return None
