"""The checks a tenant's case passes before anything of it runs: includes read the case's own
files only, ``libs`` name libraries only, no directive OpenFOAM would run unread.

Every file of the case is read the way OpenFOAM reads a dictionary (orchestration.case.foamtokens,
orchestration.case.dictcheck): comments, quoting, ``$variables``, every ``#include`` form. A file
with a ``FoamFile`` header is a dictionary OpenFOAM may read on its own (an unknown
directive in it is refused); any other file (a script, a surface, notes) is still searched
for includes and library lists, as OpenFOAM would read it if something included it. Binary
data in OpenFOAM's format is skipped by its declared size; other binary data is searched
for an include or a library list in its bytes.

`check_case` runs on an upload (placeholders read as such); `check_rendered` (through
`render_checked`) on the texts a case's templates render to for a run: at preview and
submission with the first run's values, at dispatch with each run's.

Plain Python, no Django.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import stat
import zlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from orchestration.case import casefiles, render
from orchestration.case.dictcheck import CaseCheckError, Context, DictReader
from orchestration.case.foamscope import Scope, pattern_matches
from orchestration.case.foamtokens import BinaryData, Token, tokenize
from orchestration.case.libscheck import LIBS_KEYS

__all__ = [
    "MAX_FILE_BYTES",
    "CaseCheckError",
    "check_case",
    "check_rendered",
    "etc_folder",
    "render_checked",
]

MAX_FILE_BYTES = 256 << 20  # a file read whole (gzip unpacked); larger ones: their bytes
MAX_STREAM_BYTES = 4 << 30  # a file whose bytes are searched, gzip unpacked
MAX_TOKENS = 2_000_000  # a file read as a dictionary (numbers in lists count as one)
_CHUNK = 8 << 20
_SPACE = "[ \\t\\n\\v\\f\\r]"
_FOAMFILE = re.compile(
    rf"(?:{_SPACE}+|//[^\n]*|/\*.*?\*/)*FoamFile(?![^ \t\n\v\f\r\"'/;{{}}])", re.S
)
# what a file that is not a dictionary needs for an include or a libs to be read in it
_WORTH_READING = re.compile(
    r"#(?:[ \t\n\v\f\r]|//[^\n]*|/\*.*?\*/)*(?:s?include|word)|ibs|\\\n", re.S
)
# in binary data: a directive that reads a file, a libs-like word
_BINARY_INCLUDE = re.compile(rb"#(?:[ \t\n\v\f\r]|//[^\n]*|/\*.*?\*/)*s?include", re.S)
_BINARY_LIBS = re.compile(
    rb"(?<![A-Za-z0-9_])(?:" + b"|".join(k.encode() for k in LIBS_KEYS) + rb")(?![A-Za-z0-9_])"
)
_PRINTABLE = re.compile(r"[ -~]{1,80}")
_TOKEN_CACHE: dict[tuple[str, int, int, bool], list[Token]] = {}
_CACHED_BYTES = 1 << 20  # files read once per run of a study (a template's includes)
# rendered files that passed, with what their check read: every run of a study renders most
# files the same (only those its values reach differ), and those need not be read again
_PASSED: dict[tuple[str, str | None, str, str], tuple[tuple[str, Any], ...]] = {}
_PASSED_MAX = 1024


def etc_folder(openfoam_dir: str | None = None) -> str | None:
    """OpenFOAM's etc folder (`openfoam_dir`/etc, or $WM_PROJECT_DIR/etc), when present."""
    base = openfoam_dir or os.environ.get("WM_PROJECT_DIR") or "/usr/share/openfoam"
    path = os.path.join(base, "etc")
    return path if os.path.isdir(path) else None


class _Files:
    """A case's files as OpenFOAM opens them (`name`, else `name.gz`), each read and
    tokenised once per check; `texts` stand in for files (a run's rendered templates)."""

    def __init__(self, root: str, texts: Mapping[str, str], templates: bool) -> None:
        self.root, self.texts, self.templates = root, texts, templates
        self.cache: dict[str, tuple[str, list[Token], bool]] = {}
        self.etc: dict[str, set[str] | None] = {}
        self.looked: set[str] = set()  # every name a file's check looked for

    def find(self, rel: str) -> str | None:
        self.looked.add(rel)
        for candidate in (rel, rel + ".gz"):
            if candidate in self.texts:
                return candidate
            path = os.path.join(self.root, candidate)
            if os.path.isfile(path) and not os.path.islink(path):
                return candidate
        return None

    def text(self, rel: str) -> str | None:
        """The file as OpenFOAM reads it (one character a byte), None past MAX_FILE_BYTES."""
        if rel in self.texts:
            return self.texts[rel]
        with self.open(rel) as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
        return None if len(data) > MAX_FILE_BYTES else data.decode("latin-1")

    def open(self, rel: str) -> io.BufferedIOBase:
        path = os.path.join(self.root, rel)
        with open(path, "rb") as fh:
            gzipped = fh.read(2) == b"\x1f\x8b"
        return gzip.open(path, "rb") if gzipped else open(path, "rb")

    def chunks(self, rel: str) -> Iterator[bytes]:
        """A large file's bytes in overlapping chunks (a pattern across two is in one)."""
        total, tail = 0, b""
        with self.open(rel) as fh:
            while chunk := fh.read(_CHUNK):
                total += len(chunk)
                if total > MAX_STREAM_BYTES:
                    raise CaseCheckError(
                        f"{rel} is larger than {MAX_STREAM_BYTES >> 20:,} MB as OpenFOAM reads it",
                        rel,
                    )
                yield tail + chunk
                tail = chunk[-256:]

    def is_template(self, rel: str, text: str) -> bool:
        if not self.templates or rel in self.texts or "{{" not in text:
            return False
        return casefiles.read_template(os.path.join(self.root, rel)) is not None

    def tokens(self, rel: str, text: str | None = None) -> tuple[str, list[Token], bool]:
        found = self.cache.get(rel)
        if found is not None:
            return found
        path = os.path.join(self.root, rel)
        key = None
        if rel not in self.texts:
            st = os.stat(path)
            key = (path, st.st_size, st.st_mtime_ns, self.templates)
        cached = _TOKEN_CACHE.get(key) if key else None
        text = self.text(rel) if text is None else text
        if text is None:
            raise BinaryData(f"larger than {MAX_FILE_BYTES >> 20} MB")
        template = self.is_template(rel, text)
        if cached is None:
            cached = tokenize(text, templates=template, bulk=True, limit=MAX_TOKENS)
            if key is not None and len(text) <= _CACHED_BYTES:
                if len(_TOKEN_CACHE) >= 256:
                    _TOKEN_CACHE.clear()
                _TOKEN_CACHE[key] = cached
        found = self.cache[rel] = (rel, cached, template)
        return found

    def included(self, rel: str) -> tuple[str, list[Token], bool] | None:
        actual = self.find(rel)
        return None if actual is None else self.tokens(actual)

    def etc_keys(self, etc_dir: str | None, name: str) -> set[str] | None:
        """The top-level keys an etc file sets (None: unknown, or it runs directives)."""
        if name in self.etc:
            return self.etc[name]
        keys: set[str] | None = None
        if etc_dir is not None:
            path = os.path.join(etc_dir, name)
            path = path if os.path.isfile(path) else path + ".gz"
            try:
                with open(path, "rb") as fh:
                    data = fh.read(MAX_FILE_BYTES)
                if data.startswith(b"\x1f\x8b"):
                    data = gzip.decompress(data)
                keys = _top_keys(tokenize(data.decode("latin-1")))
            except (OSError, EOFError, zlib.error, BinaryData):
                keys = None
        self.etc[name] = keys
        return keys


def _top_keys(tokens: list[Token]) -> set[str] | None:
    keys: set[str] = set()
    depth, expect = 0, True
    for token in tokens:
        if token.kind == "directive":
            return None
        if token.kind == "punct":
            if token.text in "({":
                depth += 1
            elif token.text in ")}":
                depth -= 1
                expect = depth == 0 and token.text == "}"
            elif token.text == ";":
                expect = depth == 0
            continue
        if depth == 0 and expect and token.kind in ("word", "string"):
            keys.add(token.text)
        expect = False
    return keys


def _check_file(files: _Files, rel: str, etc_dir: str | None) -> None:
    try:
        text = files.text(rel)
    except (OSError, EOFError, zlib.error) as exc:
        raise CaseCheckError(f"{rel}: a damaged gzip file ({exc})", rel) from exc
    if text is None:  # too large to read whole: its bytes are searched
        for chunk in files.chunks(rel):
            _check_bytes(chunk, rel, "large file")
        return
    dictionary = _FOAMFILE.match(text) is not None
    if not dictionary and not _WORTH_READING.search(text) and _quoted_libs(text) is None:
        return
    try:
        _, tokens, template = files.tokens(rel, text)
    except BinaryData as exc:
        _check_bytes(
            text.encode("latin-1"), rel, "binary data" if "tokens" not in str(exc) else "large file"
        )
        return
    if template:
        for token in tokens:
            if token.placeholder and "#" in token.text:
                raise CaseCheckError(
                    f"{rel} line {token.line}: {token.text!r}: a placeholder cannot write '#' "
                    "(OpenFOAM would read a directive such as #include)",
                    rel,
                )
    ctx = Context(
        tokens_of=files.included,
        etc_keys=lambda name: files.etc_keys(etc_dir, name),
        etc_dir=etc_dir,
        reading=[rel],
    )
    DictReader(ctx, rel, tokens, strict=dictionary).read(Scope())


def _quoted_libs(text: str) -> str | None:
    """A quoted text that may be a pattern matching a libs-like keyword: every text between
    two quotes on a line is tried, whichever pairs a reader would make."""
    if '"' not in text:
        return None
    for line in text.split("\n"):
        parts = line.split('"')
        for part in parts[1:-1]:
            if _PRINTABLE.fullmatch(part) and any(
                pattern_matches(part, key) is not False for key in LIBS_KEYS
            ):
                return f'"{part}"'
    return None


def _check_bytes(data: bytes, rel: str, what: str) -> None:
    """Data OpenFOAM's dictionary reader cannot be followed through here (binary data, a
    file too large to read whole): refused when its bytes hold an include or a libs-like
    word, or a quoted text that may be a pattern matching libs."""
    found = _BINARY_INCLUDE.search(data) or _BINARY_LIBS.search(data)
    if found is None and what == "large file":  # a comment may part '#' from its name
        found = re.search(rb"include", data)
    text = found.group().decode("latin-1") if found else _quoted_libs(data.decode("latin-1"))
    if text is not None:
        raise CaseCheckError(
            f"{rel}: {what} holding {text!r}; OpenFOAM could read it as a directive or a "
            "library list, which cannot be checked in it: save the file in ascii format "
            "(writeFormat ascii), or split it",
            rel,
        )


def check_case(
    root: str | os.PathLike[str],
    *,
    etc_dir: str | None,
    templates: bool = True,
    rels: Iterable[str] | None = None,
) -> None:
    """Check every file of the case at `root` (or those of `rels`; ``templates``: ``{{ }}``
    are placeholders); raises CaseCheckError naming the file and line, RenderError for a
    symbolic link."""
    base = os.fspath(root)
    files = _Files(base, {}, templates)
    for rel in rels if rels is not None else (rel for _, rel in casefiles.walk(base)):
        _check_file(files, rel, etc_dir)


def check_rendered(
    root: str | os.PathLike[str], texts: Mapping[str, str], *, etc_dir: str | None
) -> None:
    """Check the rendered texts of a case's templates (`texts`, by relative path), reading
    the files they include from the case at `root` (or from `texts`)."""
    files = _Files(os.fspath(root), texts, templates=False)
    for rel in sorted(texts):
        key = (files.root, etc_dir, rel, texts[rel])
        found = _PASSED.get(key)
        if found is not None and all(_version(files, name) == seen for name, seen in found):
            continue  # the same text, reading the same files, passed before
        files.looked = set()
        _check_file(files, rel, etc_dir)
        if len(texts[rel]) <= _CACHED_BYTES:
            if len(_PASSED) >= _PASSED_MAX:
                _PASSED.clear()
            _PASSED[key] = tuple((name, _version(files, name)) for name in sorted(files.looked))


def _version(files: _Files, rel: str) -> Any:
    """What a check reading `rel` finds: a rendered text (the text itself), a file of the
    case (its size and mtime; an upload's files do not change in place), or nothing."""
    for candidate in (rel, rel + ".gz"):
        if candidate in files.texts:
            return (candidate, files.texts[candidate])
        try:
            st = os.lstat(os.path.join(files.root, candidate))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            return (candidate, st.st_size, st.st_mtime_ns)
    return None


def render_checked(
    src: str | os.PathLike[str], context: Mapping[str, Any], *, etc_dir: str | None
) -> dict[str, str]:
    """The texts `context` renders the case at `src`'s templates to (orchestration.case.render),
    checked: a run's values could write what the upload's check could not see (a keyword, a
    comment's end). RenderError for a placeholder that cannot be filled, CaseCheckError for
    what the checks refuse. Portal-side: the run agent ships without these modules."""
    texts = render.render_files(Path(src), context)
    check_rendered(src, texts, etc_dir=etc_dir)
    return texts
