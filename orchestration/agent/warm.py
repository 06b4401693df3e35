"""A warm start: a steady run begins from a neighbouring run's converged fields instead of
the case's initial values, on the same mesh.

Each field file of the neighbour's write that the new case's start time also has gives the
new file its `internalField` (the cell values); everything else of the new file stays: its
header, its dimensions, its `boundaryField` (the run's own boundary conditions: its inflow
angle, its speed; a `$internalField` there, a free stream's value, is its initial value). Fields the new case does not start with (`phi`) are left out: the solver
makes them from the new fields and boundary conditions. A field whose format (ascii or binary),
class or cell count differs is left at its initial values, with a note.

The neighbour's case is the tenant's: it is read without following links
(orchestration/nofollow.py). Stdlib only.
"""

from __future__ import annotations

import gzip
import os
import re
import stat
import struct

from orchestration import nofollow

__all__ = ["WarmError", "internal_field_span", "keep_own_boundaries", "warm_fields"]

MAX_FIELD_BYTES = 2 * 1024**3
# components of a value, by the list's type (8-byte doubles in binary: scalar=64)
_COMPONENTS = {"scalar": 1, "vector": 3, "sphericalTensor": 1, "symmTensor": 6, "tensor": 9}
_SIZES = {kind: 8 * n for kind, n in _COMPONENTS.items()}
_FORMAT = re.compile(rb"\bformat\s+(ascii|binary)\s*;")
_CLASS = re.compile(rb"\bclass\s+(\w+)\s*;")
_LIST = re.compile(rb"\s*nonuniform\s+List<(\w+)>\s*(\d+)\s*")
_KEY = re.compile(rb"(?m)^\s*internalField\b")


class WarmError(ValueError):
    """A field file that cannot be read as OpenFOAM writes one."""


def _header_end(data: bytes) -> int:
    """Where the FoamFile header dictionary ends (0 when there is none)."""
    at = data.find(b"FoamFile")
    if at < 0:
        return 0
    depth, i = 0, data.find(b"{", at)
    if i < 0:
        raise WarmError("a FoamFile header without its dictionary")
    while i < len(data):
        if data[i : i + 1] == b"{":
            depth += 1
        elif data[i : i + 1] == b"}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise WarmError("an unterminated FoamFile header")


def internal_field_span(data: bytes) -> tuple[int, int, bytes, int]:
    """(start, end, list type, count) of the `internalField …;` entry: start at its keyword,
    end after its `;`; a uniform value has type b"" and count -1."""
    found = _KEY.search(data, _header_end(data))
    if found is None:
        raise WarmError("no internalField")
    start = found.end() - len(b"internalField")
    i = found.end()
    listed = _LIST.match(data, i)
    if listed is None:  # uniform value: up to the ;
        end = data.find(b";", i)
        if end < 0:
            raise WarmError("an internalField without its ;")
        return start, end + 1, b"", -1
    kind, count = listed.group(1), int(listed.group(2))
    i = listed.end()
    if data[i : i + 1] != b"(":
        raise WarmError("a nonuniform internalField without its list")
    if _facts(data)[0] == b"binary":
        size = _SIZES.get(kind.decode(), 0)
        if not size:
            raise WarmError(f"binary values of a type the agent does not know ({kind.decode()})")
        close = i + 1 + count * size
        if data[close : close + 1] != b")":
            raise WarmError("a binary internalField of another size than its count")
        i = close + 1
    else:
        depth = 0
        while i < len(data):
            c = data[i : i + 1]
            if c == b"(":
                depth += 1
            elif c == b")":
                depth -= 1
                if depth == 0:
                    i += 1
                    break
            i += 1
        else:
            raise WarmError("an unterminated internalField list")
    end = data.find(b";", i)
    if end < 0:
        raise WarmError("an internalField without its ;")
    return start, end + 1, kind, count


def _facts(data: bytes) -> tuple[bytes, bytes]:
    header = data[: _header_end(data)]
    fmt, cls = _FORMAT.search(header), _CLASS.search(header)
    return (fmt.group(1) if fmt else b"ascii"), (cls.group(1) if cls else b"")


def _read(dir_fd: int, name: str) -> tuple[bytes, bool]:
    data = nofollow.read_file(dir_fd, name, max_bytes=MAX_FIELD_BYTES)
    if name.endswith(".gz"):
        return gzip.decompress(data), True
    return data, False


_NUMBER = re.compile(rb"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
# fields that must stay positive where a blend extrapolates (turbulence quantities)
POSITIVE = ("k", "epsilon", "omega", "nut", "nuTilda", "alphat", "R", "kt", "v2", "f")


def _values(data: bytes) -> tuple[bytes, int, list[float]]:
    """(type, count, every component) of a file's nonuniform internalField."""
    s0, s1, kind, count = internal_field_span(data)
    if count < 0:
        raise WarmError("a uniform internalField")
    entry = data[s0:s1]
    n = _COMPONENTS.get(kind.decode(), 0)
    if not n:
        raise WarmError(f"values of a type the agent does not know ({kind.decode()})")
    start = entry.index(b"(")
    if _facts(data)[0] == b"binary":
        if b"scalar=64" not in _arch(data):
            raise WarmError("binary values that are not 8-byte doubles")
        values = list(struct.unpack(f"<{count * n}d", entry[start + 1 : start + 1 + count * n * 8]))
    else:
        values = [float(v) for v in _NUMBER.findall(entry, start + 1)]
    if len(values) != count * n:
        raise WarmError(f"{len(values)} numbers where {count} values of {n} were expected")
    return kind, count, values


def _entry(kind: bytes, count: int, values: list[float]) -> bytes:
    """An ascii `internalField nonuniform List<T> N (…);` entry (17 significant digits)."""
    n = _COMPONENTS[kind.decode()]
    if n == 1:
        rows = [f"{v:.17g}" for v in values]
    else:
        rows = [
            "(" + " ".join(f"{v:.17g}" for v in values[i : i + n]) + ")"
            for i in range(0, len(values), n)
        ]
    head = f"internalField   nonuniform List<{kind.decode()}> \n{count}\n(\n"
    return (head + "\n".join(rows) + "\n)\n;").encode()


def _blend(first: bytes, second: bytes, weight: float, name: str) -> bytes:
    """A file like `first` whose internalField is first + weight × (second − first): the
    field between two neighbours, or beyond them (weight < 0 or > 1), written as ascii; a
    turbulence quantity is kept at least the smaller of the two where that extrapolates."""
    kind, count, a = _values(first)
    kind2, count2, b = _values(second)
    if (kind2, count2) != (kind, count):
        raise WarmError("the two neighbours' fields differ in type or size")
    mixed = [x + weight * (y - x) for x, y in zip(a, b, strict=True)]
    if name.removesuffix(".gz") in POSITIVE:
        mixed = [max(v, min(x, y)) for v, x, y in zip(mixed, a, b, strict=True)]
    s0, s1, _kind, _count = internal_field_span(first)
    header = re.sub(rb"\bformat\s+binary\s*;", b"format      ascii;", first[:s0], count=1)
    return header + _entry(kind, count, mixed) + first[s1:]


def _splice(source: bytes, target: bytes) -> bytes:
    """`target` with `source`'s internalField in place of its own (a binary write's values
    as ascii text for an ascii file: a case's initial fields are mostly written by hand)."""
    s_fmt, s_cls = _facts(source)
    t_fmt, t_cls = _facts(target)
    if s_cls != t_cls:
        raise WarmError(f"a {s_cls.decode()}, the new case's a {t_cls.decode()}")
    s0, s1, kind, count = internal_field_span(source)
    t0, t1, _tkind, tcount = internal_field_span(target)
    if count >= 0 and tcount >= 0 and count != tcount:
        raise WarmError(f"{count} cells, the new case's {tcount}: another mesh")
    entry = source[s0:s1]
    if s_fmt != t_fmt:
        if not (s_fmt == b"binary" and count >= 0 and b"scalar=64" in _arch(source)):
            raise WarmError(f"written as {s_fmt.decode()}, the new case's as {t_fmt.decode()}")
        _kind, _count, values = _values(source)
        entry = _entry(kind, count, values)
    # the new case's boundary conditions that say `$internalField` meant its initial value
    # (a free stream's): they keep it
    own = target[t0 + len(b"internalField") : t1 - 1].strip()
    head, rest = target[:t0], target[t1:]
    for macro in (b"${internalField}", b"$internalField"):
        head, rest = head.replace(macro, own), rest.replace(macro, own)
    return head + entry + rest


def _write(dir_fd: int, name: str, data: bytes, *, packed: bool, owner: int | None = None) -> None:
    """A field file written anew (gzipped again when it was), never through a link."""
    fd = nofollow.create_file(dir_fd, name, owner=owner)
    with os.fdopen(fd, "wb") as out:
        out.write(gzip.compress(data, compresslevel=1) if packed else data)


def _arch(data: bytes) -> bytes:
    found = re.search(rb'\barch\s+"([^"]*)"', data[: _header_end(data)])
    return found.group(1) if found else b"LSB;label=32;scalar=64"


def warm_fields(
    *,
    source_fd: int,
    time: str,
    case_fd: int,
    start: str,
    blend: tuple[int, str, float] | None = None,
) -> tuple[int, list[str]]:
    """Give the new case's fields at `start` the internal values of the neighbour's write
    `time`, or with `blend` (a second neighbour's case, its write, a weight w) the values
    first + w × (second − first) (the field linearly between or beyond two neighbours; a
    field one of them lacks, or cannot be blended, is the first's): (fields warmed, notes
    on those left at their initial values)."""
    try:
        src = nofollow.open_dir(time, dir_fd=source_fd)
    except OSError as exc:
        raise WarmError(f"the neighbour's write {time} cannot be read: {exc}") from None
    other = -1
    if blend is not None:
        try:
            other = nofollow.open_dir(blend[1], dir_fd=blend[0])
        except OSError as exc:
            os.close(src)
            raise WarmError(
                f"the second neighbour's write {blend[1]} cannot be read: {exc}"
            ) from None
    dst = nofollow.open_dir(start, dir_fd=case_fd)
    warmed, notes = 0, []
    try:
        targets = {n for n in os.listdir(dst)}
        for name in sorted(os.listdir(src)):
            target = name if name in targets else None
            if target is None and f"{name}.gz" in targets:
                target = f"{name}.gz"
            if target is None and name.endswith(".gz") and name[:-3] in targets:
                target = name[:-3]
            if target is None:
                continue
            try:
                source_data, _ = _read(src, name)
                if blend is not None:
                    try:
                        second, _ = _read(other, name)
                        source_data = _blend(source_data, second, blend[2], name)
                    except (WarmError, OSError, EOFError) as exc:
                        notes.append(f"{target}: from the nearest neighbour only ({exc})")
                target_data, packed = _read(dst, target)
                data = _splice(source_data, target_data)
            except (WarmError, OSError, EOFError) as exc:
                notes.append(f"{target}: kept its initial values ({exc})")
                continue
            _write(dst, target, data, packed=packed)
            warmed += 1
    finally:
        os.close(src)
        os.close(dst)
        if other >= 0:
            os.close(other)
    return warmed, notes


def keep_own_boundaries(
    start_fd: int, originals: dict[str, bytes], *, owner: int | None
) -> tuple[int, list[str]]:
    """After mapFields wrote the start folder (`start_fd`): each field the case started with
    (`originals`, its files as rendered) gets the mapped cell values and keeps its own
    header and boundary conditions (mapFields maps a fixedValue patch's values too, the
    source run's inflow among them); a field mapFields added is removed (the solver makes
    it, as for a case started cold). (fields warmed, notes on those kept at their initial
    values). The files written are `owner`'s (the run's uid)."""
    warmed, notes = 0, []
    for name in sorted(os.listdir(start_fd)):
        st = os.stat(name, dir_fd=start_fd, follow_symlinks=False)
        if name not in originals and not stat.S_ISDIR(st.st_mode):
            nofollow.unlink(start_fd, name)
    for name, original in sorted(originals.items()):
        if "/" in name:
            continue
        try:
            mapped, packed = _read(start_fd, name)
            own = gzip.decompress(original) if packed else original
            data = _splice(mapped, own)
            warmed += 1
        except (WarmError, OSError, EOFError) as exc:
            notes.append(f"{name}: kept its initial values ({exc})")
            data, packed = original, False
        _write(start_fd, name, data, packed=packed, owner=owner)
    return warmed, notes
