"""Case uploads: every archive member is checked before anything is extracted."""

from __future__ import annotations

import errno
import shutil
import stat
import tarfile
import tempfile
import uuid
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from django.conf import settings

from catalog.inspection import case_inspect
from core import jobs
from core.exceptions import ApplicationError, ErrorCode
from core.jobs import Job
from orchestration.case import casecheck, casefiles, render
from quotas.fit import GB, storage_problem
from quotas.models import Quota
from studies.models import Study, Upload
from studies.usage import storage_used_bytes

SUFFIXES = (".tar.gz", ".tgz", ".zip")
MAX_NAME_BYTES = 255  # one file or folder name (the file systems' limit)
MAX_PATH_CHARS = 1024  # a whole path inside the case


def _reject(message: str, entry: str | None = None) -> ApplicationError:
    details = {"entry": entry} if entry else None
    return ApplicationError(message, code=ErrorCode.UPLOAD, field="file", details=details)


@dataclass(frozen=True)
class Member:
    name: str
    size: int
    is_dir: bool


def _check_name(name: str) -> str:
    if "\x00" in name:
        raise _reject(f"entry {name!r} has a NUL byte in its name", name)
    if name.startswith("/") or (len(name) > 1 and name[1] == ":") or name.startswith("\\"):
        raise _reject(
            f"entry {name!r} has an absolute path; archive the case with relative paths", name
        )
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if ".." in parts:
        raise _reject(f"entry {name!r} climbs out of the case with '..'", name)
    return "/".join(p for p in parts if p not in ("", "."))


def _tar_members(fh: IO[bytes]) -> list[Member]:
    try:
        tar = tarfile.open(fileobj=fh, mode="r:gz")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise _reject(f"not a readable .tar.gz archive: {exc}") from exc
    out: list[Member] = []
    limit = settings.WINDTUNNEL["UPLOAD_MAX_ENTRIES"]
    with tar:
        try:
            for info in tar:
                if len(out) >= limit:
                    raise _reject(f"the archive has more than {limit:,} entries")
                name = _check_name(info.name)
                if info.issym() or info.islnk():
                    raise _reject(
                        f"entry {info.name!r} is a link; links are not allowed in a case archive",
                        info.name,
                    )
                if not (info.isreg() or info.isdir()):
                    raise _reject(
                        f"entry {info.name!r} is a device, pipe or other special file", info.name
                    )
                if name:
                    out.append(Member(name=name, size=info.size, is_dir=info.isdir()))
        except (tarfile.TarError, OSError, EOFError, ValueError) as exc:
            raise _reject(f"the .tar.gz archive is damaged: {exc}") from exc
    return out


def _zip_members(fh: IO[bytes]) -> list[Member]:
    try:
        archive = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, OSError) as exc:
        raise _reject(f"not a readable .zip archive: {exc}") from exc
    out: list[Member] = []
    limit = settings.WINDTUNNEL["UPLOAD_MAX_ENTRIES"]
    with archive:
        infos = archive.infolist()
        if len(infos) > limit:
            raise _reject(f"the archive has {len(infos):,} entries; at most {limit:,}")
        for info in infos:
            name = _check_name(info.filename)
            # the high bits of external_attr are a Unix mode only where a Unix tool made the
            # entry (create_system 3); DOS/Windows zips leave them empty or meaningless
            mode = (info.external_attr >> 16) & 0xFFFF if info.create_system == 3 else 0
            if mode and stat.S_ISLNK(mode):
                raise _reject(
                    f"entry {info.filename!r} is a link; links are not allowed in a case archive",
                    info.filename,
                )
            if mode and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)) and stat.S_IFMT(mode):
                kind = (
                    "a device, pipe or other special file"
                    if stat.S_IFMT(mode) in _SPECIAL
                    else f"of an unknown file type (mode {mode:#o}); is the archive damaged?"
                )
                raise _reject(f"entry {info.filename!r} is {kind}", info.filename)
            if info.flag_bits & 0x1:
                raise _reject(f"entry {info.filename!r} is encrypted", info.filename)
            if name:
                out.append(Member(name=name, size=info.file_size, is_dir=info.is_dir()))
    return out


_SPECIAL = {stat.S_IFCHR, stat.S_IFBLK, stat.S_IFIFO, stat.S_IFSOCK}


def _check_layout(members: list[Member]) -> None:
    """Names a file system can hold, each once, and no name both a file and a folder: checked
    on the headers, before anything is written."""
    files: dict[str, str] = {}
    folders: set[str] = set()
    for member in members:
        name = member.name
        if len(name) > MAX_PATH_CHARS:
            raise _reject(
                f"entry {name[:80]!r}… has a path of {len(name)} characters; at most "
                f"{MAX_PATH_CHARS}",
                name,
            )
        parts = name.split("/")
        for part in parts:
            if len(part.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
                raise _reject(
                    f"entry {name!r} has a name longer than {MAX_NAME_BYTES} bytes ({part[:40]!r}…); "
                    "shorten it",
                    name,
                )
        for i in range(1, len(parts)):
            folders.add("/".join(parts[:i]))
        if member.is_dir:
            folders.add(name)
        elif name in files:
            raise _reject(f"entry {name!r} appears twice in the archive; keep one", name)
        else:
            files[name] = name
    clash = sorted(set(files) & folders)
    if clash:
        raise _reject(
            f"entry {clash[0]!r} is both a file and a folder in the archive; rename one", clash[0]
        )


def _strip_common_root(members: list[Member]) -> str:
    """Archives often hold one top folder (`cavity/system/...`); find the case root in them."""
    names = [m.name for m in members]
    if any(n == "system/controlDict" for n in names):
        return ""
    roots = [n[: -len("system/controlDict")] for n in names if n.endswith("/system/controlDict")]
    if len(roots) == 1:
        return roots[0]
    if len(roots) > 1:
        raise _reject(
            "the archive holds several cases (several system/controlDict); upload one case at a time"
        )
    raise _reject(
        "the archive has no system/controlDict; an OpenFOAM case needs one (at its top or in one top folder)"
    )


def upload_create(*, tenant, owner, filename: str, fileobj: IO[bytes], size: int) -> Upload:
    cfg = settings.WINDTUNNEL
    lower = (filename or "").lower()
    if not lower.endswith(SUFFIXES):
        raise _reject(f"{filename!r}: upload a .tar.gz, .tgz or .zip archive of the case")
    if size > cfg["UPLOAD_MAX_BYTES"]:
        raise _reject(
            f"the file is {size / 1e6:.1f} MB; at most {cfg['UPLOAD_MAX_BYTES'] / 1e6:.0f} MB"
        )
    if size == 0:
        raise _reject("the file is empty")
    is_zip = lower.endswith(".zip")
    fileobj.seek(0)
    members = _zip_members(fileobj) if is_zip else _tar_members(fileobj)
    total = sum(m.size for m in members if not m.is_dir)
    if total > cfg["UPLOAD_MAX_UNPACKED_BYTES"]:
        raise _reject(
            f"the archive unpacks to {total / 1e6:.0f} MB; at most {cfg['UPLOAD_MAX_UNPACKED_BYTES'] / 1e6:.0f} MB"
        )
    ratio = total / max(size, 1)
    if ratio > cfg["UPLOAD_MAX_RATIO"] and total > 10 * 1024 * 1024:
        raise _reject(
            f"the archive expands {ratio:.0f}× (at most {cfg['UPLOAD_MAX_RATIO']:.0f}×); it looks like an archive bomb"
        )
    _check_layout(members)
    root = _strip_common_root(members)
    _check_storage(tenant_id=tenant.id, adding=total)

    upload_id = uuid.uuid4()
    final = Path(settings.UPLOAD_DIR) / str(upload_id)
    staging = Path(tempfile.mkdtemp(prefix="upload-", dir=_ensure(Path(settings.UPLOAD_DIR))))
    case = staging / "case"
    case.mkdir()
    try:
        fileobj.seek(0)
        written = _extract(fileobj, is_zip=is_zip, root=root, dest=case, budget=total)
        _check_templates_are_utf8(case)
        _check_no_compiled_code(case)
        _check_dictionaries(case)
        try:
            placeholders = render.find_placeholders(case)
        except render.RenderError as exc:
            raise _reject(f"a case file has a broken {{{{ }}}} placeholder: {exc}") from exc
        staging.rename(final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    case = final / "case"
    return Upload.objects.create(
        id=upload_id,
        tenant=tenant,
        owner=owner,
        filename=Path(filename).name[:255],
        size_bytes=size,
        unpacked_bytes=written,
        files_count=sum(1 for m in members if not m.is_dir),
        path=str(case),
        placeholders=placeholders,
        has_mesh=(case / "constant" / "polyMesh" / "points").exists()
        or (case / "constant" / "polyMesh" / "points.gz").exists(),
        has_block_mesh_dict=(case / "system" / "blockMeshDict").exists(),
        inspection=case_inspect(path=case),
    )


def _check_storage(*, tenant_id: int, adding: int) -> None:
    """Refuse a case that would use up the tenant's storage quota (its unpacked size is
    known before anything is written): a 400 naming storage_gb, the figures and the fix."""
    quota = Quota.objects.get(tenant_id=tenant_id)
    stored = storage_used_bytes(tenant_id=tenant_id)
    problem = storage_problem(quota=quota, stored_bytes=stored, adding_bytes=adding)
    if problem:
        raise ApplicationError(
            f"the case unpacks to {adding / 1024**2:,.1f} MB and your tenant's storage quota "
            f"(storage_gb) has no room for it: {problem}",
            code=ErrorCode.QUOTA,
            field="storage_gb",
            details={"storage_gb": quota.storage_gb, "stored_gb": round(stored / GB, 3)},
        )


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _target(dest: Path, name: str, root: str) -> Path | None:
    if root and not name.startswith(root):
        return None
    rel = name[len(root) :]
    if not rel:
        return None
    target = (dest / rel).resolve()
    if not str(target).startswith(str(dest.resolve()) + "/"):
        raise _reject(f"entry {name!r} would land outside the case", name)
    return target


def _copy_limited(src: IO[bytes], dst: Path, budget: list[int], name: str) -> int:
    """Copy while counting real bytes: a lying header cannot get past the size limit."""
    written = 0
    with dst.open("wb") as out:
        while chunk := src.read(1024 * 1024):
            written += len(chunk)
            budget[0] -= len(chunk)
            if budget[0] < 0:
                raise _reject(f"entry {name!r} is larger than its header says", name)
            out.write(chunk)
    return written


# what a member's data may raise when the archive is damaged past its headers
_DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError, tarfile.TarError)
# what writing a member may raise because of the archive's own layout (not the server's state)
_LAYOUT_ERRNOS = {errno.ENAMETOOLONG, errno.EEXIST, errno.ENOTDIR, errno.EISDIR, errno.EILSEQ}


def _extract(fileobj: IO[bytes], *, is_zip: bool, root: str, dest: Path, budget: int) -> int:
    current = [""]  # the entry being written, for the error message
    try:
        return _extract_members(
            fileobj, is_zip=is_zip, root=root, dest=dest, budget=budget, current=current
        )
    except _DAMAGED as exc:
        raise _reject(
            f"the archive is damaged at entry {current[0]!r}: {exc}; pack the case again",
            current[0] or None,
        ) from exc
    except OSError as exc:
        if exc.errno not in _LAYOUT_ERRNOS:
            raise  # the server's side (disk full, permissions): not the user's archive
        raise _reject(
            f"entry {current[0]!r} cannot be unpacked: {exc.strerror}", current[0] or None
        ) from exc


def _extract_members(
    fileobj: IO[bytes], *, is_zip: bool, root: str, dest: Path, budget: int, current: list[str]
) -> int:
    remaining = [budget]
    written = 0
    if is_zip:
        with zipfile.ZipFile(fileobj) as archive:
            for info in archive.infolist():
                current[0] = info.filename
                target = _target(dest, _check_name(info.filename), root)
                if target is None:
                    continue
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as src:
                    written += _copy_limited(src, target, remaining, info.filename)
        return written
    with tarfile.open(fileobj=fileobj, mode="r:gz") as tar:
        for member in tar:
            current[0] = member.name
            target = _target(dest, _check_name(member.name), root)
            if target is None:
                continue
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            if not member.isreg():
                raise _reject(f"entry {member.name!r} is not a regular file", member.name)
            target.parent.mkdir(parents=True, exist_ok=True)
            data = tar.extractfile(member)
            if data is None:
                continue
            written += _copy_limited(data, target, remaining, member.name)
    return written


_ELF = b"\x7fELF"


def _check_no_compiled_code(case: Path) -> None:
    """A case brings no compiled code: no ELF file (a program or a shared library).
    Libraries by name (`libs (fieldFunctionObjects);`) come from the backend; a `libs`
    naming a file of the case is refused by the dictionary checks."""
    for path, rel in casefiles.walk(case):
        with open(path, "rb") as fh:
            if fh.read(4) == _ELF:
                raise _reject(
                    f"{rel} is a compiled program or library (ELF); a case may not bring native "
                    "code: remove it (solvers and libraries come from the backend's OpenFOAM "
                    "or the study's image)",
                    rel,
                )


def _check_dictionaries(case: Path) -> None:
    """Every file read as OpenFOAM reads a dictionary (orchestration.case.casecheck): includes
    read the case's own files (or OpenFOAM's etc folder) only, libs lists name libraries
    only, no directive the check does not know; a 400 naming the file and line."""
    try:
        casecheck.check_case(case, etc_dir=_etc_dir())
    except casecheck.CaseCheckError as exc:
        raise _reject(str(exc), exc.rel) from exc


def _etc_dir() -> str | None:
    return casecheck.etc_folder(settings.WINDTUNNEL["OPENFOAM_DIR"])


def _check_templates_are_utf8(case: Path) -> None:
    """A text file with `{{ placeholders }}` that is not UTF-8 would be copied as it is, its
    placeholders never filled: the solver would stop on `{{`. Say so now."""
    for path, rel in casefiles.walk(case):
        if not render.is_binary_file(path):
            continue
        with open(path, "rb") as fh:
            head = fh.read(1 << 20)
        if head.startswith(b"\x1f\x8b") or b"\x00" in head or b"{{" not in head:
            continue  # gzip or binary data: never a template
        raise _reject(
            f"{rel} has {{{{ placeholders }}}} but is not UTF-8 text (Latin-1?); save it as "
            "UTF-8 so its placeholders can be filled",
            rel,
        )


def upload_delete(*, upload: Upload) -> None:
    if Study.objects.filter(upload=upload).exists():
        raise ApplicationError(
            "studies use this upload; delete them first", code=ErrorCode.STATE, status=409
        )
    shutil.rmtree(Path(upload.path).parent, ignore_errors=True)
    upload.delete()
    # what it stored is freed: runs held for the tenant's storage quota may start now
    jobs.enqueue(Job.SCHEDULE_TENANT, upload.tenant_id)
