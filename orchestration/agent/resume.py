"""An attempt that starts from an earlier attempt's write instead of from the case's start.

run.json's `resume` (the portal's studies.continuation): {"attempt": K, "time": "latest" or a
time folder's name, "iterations": N or null, "end_time": a time or null (without iterations:
where to end instead of the case's endTime), "settings": {file: {dotted key: value}},
"required": bool}. After the case is rendered, the agent copies the write `time` of attempt
K's case (beside this attempt's folder: the same run's folder, on the portal's host or the
cluster's shared disk) into the new case and appends to its dictionaries what makes the
solver start there: `startFrom startTime; startTime T;`, with `iterations` an `endTime` of
T + N × deltaT, a function object that writes the last time step (so the attempt ends on a
write, whatever the case's write interval), and the user's `settings` (relaxation factors, a time step, a scheme) after
them. OpenFOAM reads a later entry over an earlier one of the same name and merges
sub-dictionaries, so the case's own files stay as they were above the appended lines.

The earlier case is the tenant's: it is read without following a link, and only its regular
files are copied (orchestration/nofollow.py). `required` false (a run requeued after its
agent or node was lost): without a usable write the attempt starts from the beginning.
Stdlib only, and imported only by an attempt that resumes.
"""

from __future__ import annotations

import collections
import math
import os
import re
from collections.abc import Mapping

from orchestration import nofollow
from orchestration.agent.archive import time_names

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NamedTuple

__all__ = [
    "SETTINGS_FILES",
    "SETTING_KEY",
    "SETTING_VALUE",
    "ResumeError",
    "Resumed",
    "apply_resume",
    "check_resume",
    "complete_writes",
    "overrides_text",
    "source_case",
]

# the dictionaries a restart may change, and where they are in the case
SETTINGS_FILES = {
    "controlDict": "system/controlDict",
    "fvSolution": "system/fvSolution",
    "fvSchemes": "system/fvSchemes",
}
MAX_DICT_BYTES = 8 * 1024 * 1024
# what a restart may set: a dotted key of plain words (a quoted regex key such as ".*" too)
# and a value of numbers and words (`0.5`, `Euler`, `Gauss linearUpwind grad(U)`): never a
# directive, a macro, a string or a brace that could end the entry
SETTING_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(\.([A-Za-z0-9_():,|*]+|\.\*))*$")
_KEY_PART = re.compile(r"\.\*|[^.]+")  # a dotted key's parts; `..*` ends with the regex .*
SETTING_VALUE = re.compile(r"^[A-Za-z0-9_.+\-(),: ]{1,200}$")
# the solver writes its last time step's fields whatever the case's write interval: a
# continuation ends on a write the next one can start from
FINAL_WRITE = (
    "functions { windtunnelFinalWrite { type writeObjects; libs (utilityFunctionObjects);"
    ' objects (".*"); writeOption autoWrite; writeControl onEnd; } }\n'
)
_MARK = "// Windtunnel: this attempt starts from an earlier attempt's write (its run's provenance)"


class ResumeError(Exception):
    """The attempt cannot start from the write it was asked to (the message says why)."""


def _files(case_fd: int, name: str) -> dict[str, int]:
    """{relative path: size} of the regular files of the time folder `name`."""
    try:
        fd = nofollow.open_dir(name, dir_fd=case_fd)
    except OSError:
        return {}
    try:
        return {rel: st.st_size for rel, _d, st in nofollow.walk_files(fd)}
    finally:
        os.close(fd)


def complete_writes(case_fd: int) -> list[str]:
    """The case's writes (its time folders after the first, the initial conditions) that a
    solver finished writing: every field the write before it holds is there and not empty
    (an agent or node lost while the solver wrote leaves the last one short); for the first
    write, every initial field that some write holds."""
    names = time_names(case_fd)
    out = []
    writes = {name: _files(case_fd, name) for name in names[1:]}
    # the initial fields the solver writes (a case may start with fields of models it does not
    # use: omega beside k-epsilon), then what the write before held
    written = {rel for files in writes.values() for rel in files if "/" not in rel}
    top = {rel for rel in (_files(case_fd, names[0]) if names else {}) if rel in written}
    for name, files in writes.items():
        if files and all(files.get(rel, 0) > 0 for rel in top):
            out.append(name)
        if files:
            top = {rel for rel in files if "/" not in rel}  # the fields, not uniform/ or the like
    return out


def source_case(work_dir: str, attempt: int, run: str = "") -> str:
    """The case of attempt `attempt` of this run (beside this attempt's folder) or of the
    run `run` (a neighbour's, in the same runs folder)."""
    attempts = os.path.dirname(os.path.abspath(work_dir))
    if run:
        attempts = os.path.join(os.path.dirname(attempts), run)
    return os.path.join(attempts, f"attempt-{attempt}", "case")


def _second_neighbour(raw: Any, work_dir: str) -> tuple[tuple[int, str, float] | None, int]:
    """A warm start's second neighbour ((its case's descriptor, its write, the weight), and
    the descriptor to close): None when there is none, or its write is not complete (the
    first neighbour's fields alone then)."""
    if not isinstance(raw, dict):
        return None, -1
    try:
        fd = nofollow.open_dir(source_case(work_dir, int(raw["attempt"]), str(raw["source"])))
    except (OSError, KeyError, TypeError, ValueError):
        return None, -1
    time = str(raw.get("time"))
    if time not in complete_writes(fd):
        os.close(fd)
        return None, -1
    return (fd, time, float(raw.get("weight", 0.0))), fd


def _warm(resume: Mapping[str, Any], *, work_dir: str, case: str, attempt: int) -> Resumed:
    """A warm start: the neighbour run's write gives the new case's initial fields their
    cell values (orchestration/agent/warm.py); the case starts at its own start time."""
    from orchestration.agent.warm import WarmError, warm_fields  # lazy: warm starts only

    run = str(resume["source"])
    source = source_case(work_dir, attempt, run)
    try:
        src_fd = nofollow.open_dir(source)
    except OSError:
        raise ResumeError(f"run {run}'s files are not on this machine ({source})") from None
    try:
        writes = complete_writes(src_fd)
        wanted = str(resume.get("time") or "latest")
        picked = [w for w in writes if wanted == "latest" or float(w) == float(wanted)]
        if not picked:
            raise ResumeError(f"run {run} has no complete write {wanted} to start warm from")
        if resume.get("map"):
            return _mapped(src_fd, run=run, source=source, attempt=attempt, time=picked[-1])
        blend, other_fd = _second_neighbour(resume.get("blend"), work_dir)
        case_fd = nofollow.open_dir(case)
        try:
            starts = time_names(case_fd)
            if not starts:
                raise ResumeError("the case has no start time folder to warm")
            warmed, notes = warm_fields(
                source_fd=src_fd, time=picked[-1], case_fd=case_fd, start=starts[0], blend=blend
            )
        except WarmError as exc:
            raise ResumeError(str(exc)) from None
        finally:
            os.close(case_fd)
            if other_fd >= 0:
                os.close(other_fd)
    finally:
        os.close(src_fd)
    if not warmed:
        raise ResumeError(f"no field of run {run}'s write {picked[-1]} fits: {'; '.join(notes)}")
    note = f"warm start from time {picked[-1]} of run {run} ({warmed} fields)"
    if blend is not None:
        note += f", blended with run {resume['blend']['source']} (weight {blend[2]:g})"
    if notes:
        note += "; " + "; ".join(notes)
    return Resumed(note, attempt, picked[-1], 0)


def _mapped(src_fd: int, *, run: str, source: str, attempt: int, time: str) -> Resumed:
    """A warm start from a run of another mesh (a finer or coarser level of the same
    geometry): nothing is copied now. Once this case's prepare steps have made its mesh, the
    supervisor maps the source's write onto it with OpenFOAM's mapFields, in the sandbox
    with the source case read-only (orchestration/agent/supervisor.py)."""
    try:
        mesh_fd = nofollow.open_dir("constant/polyMesh", dir_fd=src_fd)
    except OSError:
        raise ResumeError(f"run {run} has no mesh (constant/polyMesh) to map from") from None
    os.close(mesh_fd)
    note = (
        f"warm start from time {time} of run {run}, whose mesh differs: its fields are mapped "
        "onto this case's mesh (mapFields) once the mesh is made"
    )
    return Resumed(note, attempt, time, 0, source)


def _number(value: float) -> str:
    return f"{value:.12g}"


def _scalar(case: str, rel: str, key: str) -> float | None:
    """A top-level number of a case's dictionary (None when it is not a plain number)."""
    from orchestration.case.foamdict import DictError, parse_file  # lazy: resumes only

    try:
        parsed = parse_file(os.path.join(case, rel), case_root=case)
    except (DictError, OSError):
        return None
    raw = parsed.get(key) if hasattr(parsed, "get") else None
    if isinstance(raw, list) and len(raw) == 1:
        raw = raw[0]
    try:
        return float(str(raw))
    except (TypeError, ValueError):
        return None


def _source_end(src_fd: int) -> float | None:
    """The endTime of the earlier attempt's controlDict (the tenant's file: read without
    following a link, its #includes not followed); None when it is not a plain number."""
    from orchestration.case.foamdict import DictError, parse_text  # lazy: resumes only

    try:
        data = nofollow.read_file(src_fd, SETTINGS_FILES["controlDict"], max_bytes=MAX_DICT_BYTES)
        value = parse_text(data.decode("utf-8", "replace")).get("endTime")
    except (DictError, OSError):
        return None
    try:
        return float(str(value[0] if isinstance(value, list) and len(value) == 1 else value))
    except ValueError:
        return None


def _entry(path: list[str], value: str) -> str:
    """`a.b.c` = v as OpenFOAM text: `a { b { c v; } }`."""
    text = f"{_quoted(path[-1])} {value};"
    for key in reversed(path[:-1]):
        text = f"{_quoted(key)} {{ {text} }}"
    return text


def _quoted(key: str) -> str:
    return key if key.replace("_", "a").isalnum() else f'"{key}"'


def overrides_text(entries: Mapping[str, str]) -> str:
    """Dotted keys and their values as lines to append to a dictionary."""
    lines = [_entry(_KEY_PART.findall(key), value) for key, value in entries.items()]
    return "\n" + _MARK + "\n" + "\n".join(lines) + "\n"


def _append(case_fd: int, rel: str, text: str) -> None:
    """Append to a dictionary of the new case (a file the agent rendered; read and written
    again without following a link all the same)."""
    try:
        data = nofollow.read_file(case_fd, rel, max_bytes=MAX_DICT_BYTES)
    except OSError as exc:
        raise ResumeError(f"cannot read the case's {rel}: {exc}") from None
    fd = nofollow.create_file(case_fd, rel)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data + text.encode())


def _copy_tree(src_fd: int, name: str, dest_fd: int) -> int:
    """Copy the regular files of folder `name` of `src_fd` into `dest_fd`/`name` (made new);
    links and special files are left out. The number of files."""
    top = nofollow.open_dir(name, dir_fd=src_fd)
    count = 0
    try:
        os.mkdir(name, 0o755, dir_fd=dest_fd)
        for rel, folder_fd, st in nofollow.walk_files(top):
            parts = rel.split("/")
            parent = name
            for part in parts[:-1]:
                parent = f"{parent}/{part}"
                try:
                    os.mkdir(parent, 0o755, dir_fd=dest_fd)
                except FileExistsError:
                    pass
            try:
                source = nofollow.open_file(folder_fd, parts[-1])
            except OSError:
                continue  # gone, or swapped for a link since the walk listed it
            try:
                if os.fstat(source).st_ino != st.st_ino:
                    continue  # swapped since the walk listed it
                target = nofollow.create_file(dest_fd, f"{parent}/{parts[-1]}")
                try:
                    while os.sendfile(target, source, None, 1 << 24) > 0:
                        pass
                finally:
                    os.close(target)
            finally:
                os.close(source)
            count += 1
    finally:
        os.close(top)
    return count


if TYPE_CHECKING:

    class Resumed(NamedTuple):
        note: str  # a line for the log ('': nothing to resume: started from the beginning)
        attempt: int  # the attempt whose write it started from (0: none)
        time: str  # that write's time
        steps_before: int  # time steps solved before it (uniform/time): this attempt adds
        # a warm start from another mesh: the source case whose write `time` mapFields maps
        # onto this case's mesh once its prepare steps made it ('' for any other start)
        map_from: str = ""

else:  # typing is not imported at run time (orchestration/agent/spec.py)
    Resumed = collections.namedtuple(
        "Resumed", "note attempt time steps_before map_from", defaults=("",)
    )


def _whole(value: Any, *, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _name(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and "/" not in value and value[0] != "."


def check_resume(raw: Any) -> None:
    """run.json's resume checked: ResumeError naming what is wrong."""
    if not isinstance(raw, Mapping):
        raise ResumeError("resume must be an object")
    iterations, end_time, blend = raw.get("iterations"), raw.get("end_time"), raw.get("blend")
    if not _whole(raw.get("attempt"), low=1):
        raise ResumeError("resume.attempt must be an attempt number")
    if iterations is not None and not _whole(iterations, low=1):
        raise ResumeError("resume.iterations must be a positive integer or null")
    if end_time is not None and not _finite(end_time):
        raise ResumeError("resume.end_time must be a number or null")
    if not _name(raw.get("time", "latest")):
        raise ResumeError("resume.time must be 'latest' or a time folder's name")
    if raw.get("source") is not None and not _name(raw["source"]):
        raise ResumeError("resume.source must be a run id")
    if not isinstance(raw.get("map", False), bool) or raw.get("map") and not raw.get("source"):
        raise ResumeError("resume.map must be true or false, and true only with a source run")
    if blend is not None and not (
        isinstance(blend, Mapping)
        and _name(blend.get("source"))
        and _whole(blend.get("attempt"), low=1)
        and _finite(blend.get("weight"))
    ):
        raise ResumeError("resume.blend must name a run, its attempt, time and weight")
    if raw.get("fallback") is not None:
        check_resume(raw["fallback"])
    settings = raw.get("settings") or {}
    if not isinstance(settings, Mapping) or not all(
        isinstance(values, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in values.items())
        for values in settings.values()
    ):
        raise ResumeError("resume.settings must map files to {key: value} texts")


def apply_resume(*, resume: Mapping[str, Any], work_dir: str, case: str) -> Resumed:
    """Copy the earlier attempt's write into `case` (rendered already) and append what starts
    the solver there. ResumeError when the attempt cannot resume; with `required` false (a
    run requeued after a loss) its `fallback` is tried instead (the continuation it was
    on), else nothing is done and it starts from the beginning."""
    check_resume(resume)
    required = resume.get("required", True) is not False
    attempt = int(resume["attempt"])
    try:
        return _apply(resume, work_dir=work_dir, case=case, attempt=attempt)
    except ResumeError:
        if required:
            raise
        fallback = resume.get("fallback")
        if isinstance(fallback, dict):
            return apply_resume(resume=fallback, work_dir=work_dir, case=case)
        return Resumed("", 0, "", 0)


_INDEX = re.compile(rb"^\s*index\s+(\d+)\s*;", re.MULTILINE)


def _time_index(case_fd: int, time: str) -> int:
    """The time step index a write was made at (its uniform/time), 0 when unknown."""
    try:
        data = nofollow.read_file(case_fd, f"{time}/uniform/time", max_bytes=64 * 1024)
    except OSError:
        return 0
    found = _INDEX.search(data)
    return int(found.group(1)) if found else 0


def _apply(resume: Mapping[str, Any], *, work_dir: str, case: str, attempt: int) -> Resumed:
    if resume.get("source"):
        return _warm(resume, work_dir=work_dir, case=case, attempt=attempt)
    source = source_case(work_dir, attempt)
    try:
        src_fd = nofollow.open_dir(source)
    except OSError:
        raise ResumeError(
            f"attempt {attempt}'s files are not on this machine ({source}): a run continues "
            "where its earlier attempts' folders are reachable (local and Slurm backends)"
        ) from None
    try:
        writes = complete_writes(src_fd)
        wanted = str(resume.get("time") or "latest")
        if wanted == "latest":
            if not writes:
                raise ResumeError(f"attempt {attempt} wrote no time to start from")
            time = writes[-1]
        else:
            matches = [w for w in writes if float(w) == float(wanted)]
            if not matches:
                listed = ", ".join(writes[-10:]) or "none"
                raise ResumeError(
                    f"attempt {attempt} has no complete write at time {wanted} "
                    f"(its writes: {listed})"
                )
            time = matches[0]
        case_fd = nofollow.open_dir(case)
        try:
            if time in time_names(case_fd):
                raise ResumeError(f"the case's own files hold a time {time} already")
            files = _copy_tree(src_fd, time, case_fd)
            index = _time_index(case_fd, time)
            entries = {"startFrom": "startTime", "startTime": time}
            iterations, end_time = resume.get("iterations"), resume.get("end_time")
            if resume.get("keep_end"):  # a lost attempt goes on to the end it had
                end_time = _source_end(src_fd)
            if end_time is not None and not iterations:  # the end the run had before
                entries["endTime"] = _number(float(end_time))
            elif iterations:
                delta = _scalar(case, SETTINGS_FILES["controlDict"], "deltaT")
                if delta is None or delta <= 0:
                    raise ResumeError("system/controlDict has no deltaT the agent can read")
                entries["endTime"] = _number(float(time) + int(iterations) * delta)
            settings = dict(resume.get("settings") or {})
            for name, values in settings.items():
                if name not in SETTINGS_FILES:
                    raise ResumeError(f"settings: {name} is not one of {', '.join(SETTINGS_FILES)}")
                for key, value in (values or {}).items():
                    if not SETTING_KEY.match(key) or not SETTING_VALUE.match(value):
                        raise ResumeError(f"settings: {name} {key} = {value!r} is not allowed")
            control = {**entries, **dict(settings.pop("controlDict", {}) or {})}
            _append(case_fd, SETTINGS_FILES["controlDict"], overrides_text(control) + FINAL_WRITE)
            for name, values in settings.items():
                if values and name in SETTINGS_FILES:
                    _append(case_fd, SETTINGS_FILES[name], overrides_text(dict(values)))
        finally:
            os.close(case_fd)
    finally:
        os.close(src_fd)
    until = f" until {entries['endTime']}" if "endTime" in entries else ""
    note = f"resuming from time {time} of attempt {attempt} ({files} files){until}"
    return Resumed(note, attempt, time, index)
