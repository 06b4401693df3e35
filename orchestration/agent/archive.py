"""The result archive: what a user needs from a finished case, under a size budget."""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

from orchestration.agent import PROVENANCE_FILE

__all__ = ["build_archive", "latest_time_dir"]

POLYMESH_INLINE_LIMIT = 20 * 1024 * 1024
MANIFEST = "windtunnel-archive.txt"


def _is_time(name: str) -> bool:
    try:
        float(name)
    except ValueError:
        return False
    return True


def latest_time_dir(case: Path) -> Path | None:
    """The largest numeric directory of the case (reconstructed results), if any."""
    times = [p for p in case.iterdir() if p.is_dir() and _is_time(p.name)]
    return max(times, key=lambda p: float(p.name)) if times else None


def _files(path: Path) -> Iterator[Path]:
    if path.is_symlink():
        return
    if path.is_file():
        yield path
        return
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(filenames):
            file = Path(dirpath) / name
            if file.is_file() and not file.is_symlink():
                yield file


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in _files(path))


def _candidates(case: Path) -> list[tuple[str, list[Path]]]:
    """(label, paths) in priority order: earlier groups are kept when the budget is short."""
    logs = sorted(p for p in case.glob("log.*") if p.is_file())
    constant = case / "constant"
    polymesh = constant / "polyMesh"
    constant_rest = (
        sorted(p for p in constant.iterdir() if p != polymesh) if constant.is_dir() else []
    )
    latest = latest_time_dir(case)
    groups: list[tuple[str, list[Path]]] = [
        # first: the portal reads the flow-field artifact from the archive's start
        ("flow fields", [case / "windtunnel"]),
        ("provenance", [case / PROVENANCE_FILE]),  # a few kB: how the run was made
        ("logs", logs),
        ("system", [case / "system"]),
        ("constant", constant_rest),
        ("postProcessing", [case / "postProcessing"]),
    ]
    if latest is not None:
        groups.append((f"time {latest.name}", [latest]))
    if polymesh.is_dir():
        groups.append(("constant/polyMesh", [polymesh]))
    groups.append(("VTK", [case / "VTK"]))  # foamToVTK's, for ParaView
    return [(label, [p for p in paths if p.exists()]) for label, paths in groups]


def build_archive(case: Path, dest: Path, *, max_bytes: int) -> list[str]:
    """Write `dest` (.tar.gz, paths relative to the case); return notes on what was left out.

    The budget is counted on uncompressed sizes, so the archive always stays under it.
    constant/polyMesh goes in only when it is under 20 MB. A log too large for the budget
    goes in as its tail.
    """
    notes: list[str] = []
    budget = max_bytes - 64 * 1024  # room for tar headers and the manifest
    with tarfile.open(dest, "w:gz", compresslevel=1) as tar:  # fast: it sits in the run slot
        for label, paths in _candidates(case):
            if label == "constant/polyMesh" and _size(paths[0]) > POLYMESH_INLINE_LIMIT:
                notes.append("constant/polyMesh left out (larger than 20 MB)")
                continue
            for path in paths:
                size = _size(path)
                rel = path.relative_to(case).as_posix()
                if size <= budget:
                    for file in _files(path):
                        tar.add(file, arcname=file.relative_to(case).as_posix(), recursive=False)
                    budget -= size
                elif label == "logs" and budget > 4096:
                    tail = budget // 2
                    _add_tail(tar, path, rel, tail)
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


def _add_tail(tar: tarfile.TarFile, path: Path, arcname: str, size: int) -> None:
    with path.open("rb") as fh:
        fh.seek(max(path.stat().st_size - size, 0))
        data = fh.read(size)
    info = tarfile.TarInfo(arcname)
    info.size = len(data)
    info.mtime = int(path.stat().st_mtime)
    tar.addfile(info, io.BytesIO(data))
