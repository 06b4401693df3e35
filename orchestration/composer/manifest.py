"""Package manifests (packages/<name>/package.yaml): load, validate, compare versions.

Validation is the JSON Schema in `packages/package.schema.json` plus the checks a schema
cannot express (name = folder, placeholders of command templates, files inside the repo).
Every error names the file and the field.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import hashlib
import json
import operator
import os
import re
import string
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import yaml

__all__ = [
    "Catalog",
    "Constraint",
    "FileEntry",
    "Manifest",
    "ManifestError",
    "Requirement",
    "SCHEMA_PATH",
    "VersionKey",
    "load_catalog",
    "load_manifest",
    "parse_requirement",
    "render_argv",
    "validate_manifest",
    "version_key",
]

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "packages" / "package.schema.json"
BUILTIN_PLACEHOLDERS = {"solver", "processes", "np"}
ALWAYS_EXCLUDED = ("__pycache__", "*.pyc", "*.pyo", ".DS_Store")


class ManifestError(ValueError):
    """A manifest is invalid: `path` and `field` say where."""

    def __init__(self, path: Path | str, field: str | None, message: str) -> None:
        self.path = str(path)
        self.field = field
        self.problem = message
        where = f"{self.path}: {field}: " if field else f"{self.path}: "
        super().__init__(where + message)


# -- versions ------------------------------------------------------------------------------


# a version as `version_key` makes it comparable
VersionKey = tuple[tuple[int, int | str], ...]


def version_key(version: str) -> VersionKey:
    """Sort key: numeric components compare as numbers (0.10 > 0.9), text after numbers."""
    parts = re.split(r"[.+~-]", str(version))
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts if p != "")


_OPS: dict[str, Callable[[VersionKey, VersionKey], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}


@dataclasses.dataclass(frozen=True)
class Constraint:
    op: str
    version: str

    def allows(self, version: str) -> bool:
        return _OPS[self.op](version_key(version), version_key(self.version))

    def __str__(self) -> str:
        return f"{self.op}{self.version}"


@dataclasses.dataclass(frozen=True)
class Requirement:
    """'name' or 'name >=1, <2': a package name and the versions it accepts."""

    name: str
    constraints: tuple[Constraint, ...] = ()

    def allows(self, version: str) -> bool:
        return all(c.allows(version) for c in self.constraints)

    def __str__(self) -> str:
        if not self.constraints:
            return self.name
        return f"{self.name} {', '.join(map(str, self.constraints))}"


_REQ_RE = re.compile(r"^\s*([a-z0-9][a-z0-9-]*)\s*(.*?)\s*$")
_CON_RE = re.compile(r"^(==|!=|>=|<=|>|<)\s*([0-9A-Za-z][0-9A-Za-z.+~-]*)$")


def parse_requirement(text: str) -> Requirement:
    match = _REQ_RE.match(str(text))
    if not match:
        raise ValueError(f"not a requirement: {text!r} (write 'name' or 'name >=1.0, <2')")
    name, rest = match.groups()
    constraints = []
    if rest:
        for clause in rest.split(","):
            con = _CON_RE.match(clause.strip())
            if not con:
                raise ValueError(
                    f"{text!r}: {clause.strip()!r} is not a version constraint "
                    "(use ==, !=, >=, <=, > or < and a version)"
                )
            constraints.append(Constraint(con.group(1), con.group(2)))
    return Requirement(name, tuple(constraints))


# -- manifests ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class FileEntry:
    """One file a package copies into the image."""

    source: Path  # absolute path on disk
    dest: str  # absolute path in the image
    mode: int
    sha256: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class Manifest:
    name: str
    version: str
    description: str
    depends: tuple[Requirement, ...]
    conflicts: tuple[Requirement, ...]
    solvers: tuple[str, ...]
    utilities: tuple[str, ...]
    debian: tuple[str, ...]
    files: tuple[Mapping[str, Any], ...]
    env: Mapping[str, str]
    run_configurations: Mapping[str, Any]
    path: Path  # the package.yaml
    data: Mapping[str, Any]  # the manifest as written

    @property
    def folder(self) -> Path:
        return self.path.parent

    def __str__(self) -> str:
        return f"{self.name} {self.version}"

    @functools.cached_property
    def file_entries(self) -> tuple[FileEntry, ...]:
        """Every file this package installs, in a stable order, with its content hash."""
        return tuple(_file_entries(self))

    def build_identity(self) -> dict[str, Any]:
        """What of this package goes into an image's digest: everything that changes its bits."""
        return {
            "name": self.name,
            "version": self.version,
            "debian": list(self.debian),
            "env": dict(sorted(self.env.items())),
            "provides": {"solvers": list(self.solvers), "utilities": list(self.utilities)},
            "files": [
                {"dest": f.dest, "mode": f.mode, "sha256": f.sha256} for f in self.file_entries
            ],
        }


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    import jsonschema

    schema = json.loads(SCHEMA_PATH.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _field(path: Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class _SchemaError(Protocol):
    """What a message is made of in a jsonschema.ValidationError."""

    validator: str
    validator_value: Any
    instance: Any
    message: str


def _schema_message(error: _SchemaError) -> str:
    if error.validator == "additionalProperties":
        return error.message.replace("Additional properties are not allowed", "unknown key(s)")
    if error.validator == "required":
        return error.message.replace("is a required property", "is required")
    if error.validator == "pattern":
        return f"{error.instance!r} has the wrong form (expected to match {error.validator_value})"
    return error.message


def validate_manifest(data: Any, *, path: Path | str) -> None:
    """Raise ManifestError for the first problem (schema first, then the other rules)."""
    if not isinstance(data, Mapping):
        raise ManifestError(path, None, "expected a mapping at the top")
    errors = sorted(_validator().iter_errors(dict(data)), key=lambda e: (len(e.path), str(e.path)))
    if errors:
        error = errors[0]
        field = _field(error.absolute_path)
        if error.validator in ("required", "additionalProperties") and field == "":
            field = None  # type: ignore[assignment]
        raise ManifestError(path, field or None, _schema_message(error))
    folder = Path(path).parent.name
    if Path(path).name == "package.yaml" and data["name"] != folder:
        raise ManifestError(path, "name", f"{data['name']!r} must equal its folder name {folder!r}")
    for key in ("depends", "conflicts"):
        for i, text in enumerate(data.get(key) or ()):
            try:
                req = parse_requirement(text)
            except ValueError as exc:
                raise ManifestError(path, f"{key}[{i}]", str(exc)) from None
            if req.name == data["name"]:
                raise ManifestError(path, f"{key}[{i}]", "a package cannot name itself")
    for cname, config in (data.get("run_configurations") or {}).items():
        allowed = BUILTIN_PLACEHOLDERS | set(config.get("parameters") or {})
        argvs = [("argv", config["argv"])] if "argv" in config else []
        for i, step in enumerate(config.get("steps") or ()):
            argvs.append((f"steps[{i}].argv", step["argv"]))
            argvs.append((f"steps[{i}].name", [step["name"]]))
        for where, argv in argvs:
            for j, word in enumerate(argv):
                for name in _placeholders(word):
                    if name not in allowed:
                        raise ManifestError(
                            path,
                            f"run_configurations.{cname}.{where}"
                            + ("" if where.endswith("name") else f"[{j}]"),
                            f"unknown placeholder {{{name}}}; known: "
                            + ", ".join(f"{{{n}}}" for n in sorted(allowed)),
                        )
    repo = Path(path).resolve().parents[2]
    for i, spec in enumerate((data.get("install") or {}).get("files") or ()):
        src = (Path(path).parent / spec["src"]).resolve()
        if not (src == repo or repo in src.parents):
            raise ManifestError(
                path, f"install.files[{i}].src", f"{spec['src']!r} points outside the repository"
            )
        if not src.exists():
            raise ManifestError(path, f"install.files[{i}].src", f"{spec['src']!r} does not exist")


def _placeholders(word: str) -> Iterator[str]:
    try:
        for _, name, _, _ in string.Formatter().parse(word):
            if name is not None:
                yield name
    except ValueError:
        yield word  # unbalanced braces: reported as an unknown placeholder


def load_manifest(path: Path | str) -> Manifest:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ManifestError(path, None, f"cannot read it: {exc}") from None
    except yaml.YAMLError as exc:
        raise ManifestError(path, None, f"not valid YAML: {exc}") from None
    validate_manifest(data, path=path)
    provides = data["provides"]
    install = data["install"]
    return Manifest(
        name=data["name"],
        version=str(data["version"]),
        description=str(data["description"]).strip(),
        depends=tuple(parse_requirement(r) for r in data["depends"]),
        conflicts=tuple(parse_requirement(r) for r in data.get("conflicts") or ()),
        solvers=tuple(provides["solvers"]),
        utilities=tuple(provides["utilities"]),
        debian=tuple(install["debian"]),
        files=tuple(install["files"]),
        env=dict(data.get("env") or {}),
        run_configurations=dict(data.get("run_configurations") or {}),
        path=path.resolve(),
        data=data,
    )


def _excluded(rel: str, patterns: tuple[str, ...]) -> bool:
    parts = rel.split("/")
    for pattern in patterns:
        if fnmatch.fnmatch(rel, pattern) or any(fnmatch.fnmatch(p, pattern) for p in parts):
            return True
    return False


def _file_entries(manifest: Manifest) -> Iterator[FileEntry]:
    for spec in manifest.files:
        src = (manifest.folder / spec["src"]).resolve()
        dest = spec["dest"].rstrip("/") or "/"
        include = tuple(spec.get("include") or ())
        exclude = ALWAYS_EXCLUDED + tuple(spec.get("exclude") or ())
        if src.is_file():  # dest is the file's path in the image
            wanted = not include or any(fnmatch.fnmatch(src.name, p) for p in include)
            files = [(src, dest)] if wanted else []
        else:
            files = []
            for root, dirs, names in os.walk(src):
                dirs.sort()
                for name in sorted(names):
                    full = Path(root) / name
                    rel = full.relative_to(src).as_posix()
                    if include and not any(fnmatch.fnmatch(rel, p) for p in include):
                        continue
                    if _excluded(rel, exclude) or full.is_symlink():
                        continue
                    files.append((full, f"{dest}/{rel}"))
        for full, target in sorted(files, key=lambda item: item[1]):
            content = full.read_bytes()
            yield FileEntry(
                source=full,
                dest=target,
                mode=0o755 if os.access(full, os.X_OK) else 0o644,
                sha256=hashlib.sha256(content).hexdigest(),
            )


# -- the catalog ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Catalog:
    """The packages available to compose from: name → versions (one per folder today)."""

    packages: Mapping[str, tuple[Manifest, ...]]
    root: Path | None = None

    def versions(self, name: str) -> tuple[Manifest, ...]:
        return self.packages.get(name, ())

    def latest(self, name: str) -> Manifest | None:
        versions = self.versions(name)
        return max(versions, key=lambda m: version_key(m.version)) if versions else None

    def names(self) -> list[str]:
        return sorted(self.packages)

    def providers(self, executable: str) -> list[Manifest]:
        """Packages (latest versions) that provide a solver or utility of this name."""
        out = []
        for name in self.names():
            m = self.latest(name)
            if m and (executable in m.solvers or executable in m.utilities):
                out.append(m)
        return out

    @classmethod
    def of(cls, manifests: list[Manifest], root: Path | None = None) -> Catalog:
        grouped: dict[str, list[Manifest]] = {}
        for m in manifests:
            grouped.setdefault(m.name, []).append(m)
        return cls(
            {k: tuple(sorted(v, key=lambda m: version_key(m.version))) for k, v in grouped.items()},
            root,
        )


def load_catalog(root: Path | str) -> Catalog:
    """Every packages/<name>/package.yaml under `root`, validated."""
    root = Path(root)
    manifests = [load_manifest(p) for p in sorted(root.glob("*/package.yaml"))]
    return Catalog.of(manifests, root)


def render_argv(
    argv: list[str] | tuple[str, ...],
    *,
    solver: str,
    processes: int,
    parameters: Mapping[str, Any] | None = None,
    declared: Mapping[str, Any] | None = None,
) -> list[str]:
    """Fill a command template: {solver}, {processes}/{np} and declared parameters."""
    values: dict[str, Any] = {
        name: (spec or {}).get("default") for name, spec in (declared or {}).items()
    }
    values.update(parameters or {})
    values.update({"solver": solver, "processes": str(processes), "np": str(processes)})
    return [str(word).format(**values) for word in argv]
