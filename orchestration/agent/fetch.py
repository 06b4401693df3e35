"""The case source from the portal, for agents on machines that do not share its files (VMs).

GET /api/v1/ingest/runs/<id>/case/?attempt=N answers a tar.gz of the study's case source; it is
unpacked member by member: only plain files and directories under the destination, no links,
devices, absolute paths or `..`, and a bound on the unpacked size (archive bombs).
"""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path, PurePosixPath

from orchestration.agent.client import PortalClient

__all__ = ["CaseFetchError", "fetch_case", "safe_extract"]

MAX_ARCHIVE_BYTES = 2 * 1024**3
MAX_UNPACKED_BYTES = 8 * 1024**3
MAX_MEMBERS = 200_000


class CaseFetchError(Exception):
    """The archive is unusable (not a portal problem worth retrying)."""


def safe_extract(archive: Path, dest: Path, *, max_bytes: int = MAX_UNPACKED_BYTES) -> int:
    """Unpack `archive` into `dest` (which must not exist yet); the number of files."""
    dest.mkdir(parents=True)
    files = total = 0
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            for count, member in enumerate(tar, start=1):
                if count > MAX_MEMBERS:
                    raise CaseFetchError(f"more than {MAX_MEMBERS} entries")
                parts = PurePosixPath(member.name).parts
                if not parts or member.name.startswith("/") or ".." in parts:
                    raise CaseFetchError(f"unsafe path {member.name!r}")
                target = dest.joinpath(*parts)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                if not member.isfile():
                    raise CaseFetchError(f"{member.name!r} is not a plain file or directory")
                total += member.size
                if total > max_bytes:
                    raise CaseFetchError(f"unpacks to more than {max_bytes} bytes")
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                if source is None:
                    raise CaseFetchError(f"cannot read {member.name!r}")
                with source, open(target, "wb") as out:
                    shutil.copyfileobj(source, out, 1 << 20)
                target.chmod(0o755 if member.mode & 0o111 else 0o644)
                files += 1
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise CaseFetchError(f"bad case archive: {exc}") from exc
    return files


def fetch_case(client: PortalClient, *, dest: Path, scratch: Path) -> int:
    """Download the case source and unpack it into `dest` (replaced when present)."""
    archive = scratch / "case-source.tar.gz"
    client.get_file("case/", archive, max_bytes=MAX_ARCHIVE_BYTES)
    if dest.exists():
        shutil.rmtree(dest)
    try:
        return safe_extract(archive, dest)
    finally:
        archive.unlink(missing_ok=True)
