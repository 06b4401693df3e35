"""Compositions: a resolved closure + a base + a recipe, identified by a content digest.

The digest covers everything that changes the image's bits: the recipe text (Containerfile
or cloud-init user data, which names the base), each package's build identity (version,
Debian packages, environment, what it provides, and the hash of every file it copies) and the
recipe generator's version. It does not cover descriptions or run configurations (they are
read from the catalog when a study runs) or the name (two requests with one closure share an
image). Same digest, same image: builds are cached and reused.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import hashlib
import io
import json
import lzma
import os
import shutil
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from orchestration.composer.manifest import Catalog, Manifest, Requirement, parse_requirement
from orchestration.composer.resolve import resolve

__all__ = [
    "BaseSpec",
    "Composition",
    "DEFAULT_BASE",
    "IMPLICIT_PACKAGES",
    "KINDS",
    "LABEL_PREFIX",
    "RECIPE_VERSION",
    "compose",
    "layer_digests",
]

RECIPE_VERSION = 2  # bump when the recipe generator changes what it produces
# unpacks a payload (argv[1]) into a directory (argv[2]), as `tar -xJf … -C …` would
UNPACK = "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])"
KINDS = ("container", "vm")
IMPLICIT_PACKAGES = ("windtunnel-agent",)  # every image runs the agent
LABEL_PREFIX = "org.windtunnel"
REPOSITORY = "localhost/windtunnel"


def _sha256(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def layer_digests(*, kind: str, packages: Iterable[Mapping[str, str]]) -> tuple[str, ...]:
    """The digest of each package layer of an image, in install order (the closure's): the
    layer of package i is named by the kind and packages 0..i ({name, version}), chained as
    `buildah --layers` stacks them, so two images that share their first packages share
    those layers' digests. Warm-pool workers report these to say what their cache holds
    (orchestration.planning.placement)."""
    out: list[str] = []
    parent = _sha256({"kind": kind, "recipe": RECIPE_VERSION})
    for p in packages:
        parent = _sha256({"parent": parent, "name": p["name"], "version": p["version"]})
        out.append(parent)
    return tuple(out)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BaseSpec:
    """What every image starts from.

    Containers: a Debian root filesystem made with `debootstrap --variant=<variant> <suite>`
    (built locally and cached by its digest). VMs: the distribution's cloud image, named as
    it is in the cloud's image service. The mirror is a transport detail, not part of the
    digest (WINDTUNNEL_DEBIAN_MIRROR).
    """

    distribution: str = "debian"
    suite: str = "bookworm"
    variant: str = "minbase"
    include: tuple[str, ...] = ()
    cloud_image: str = "debian-12-genericcloud-amd64"

    def identity(self) -> dict[str, Any]:
        return {
            "distribution": self.distribution,
            "suite": self.suite,
            "variant": self.variant,
            "include": sorted(self.include),
            "recipe": RECIPE_VERSION,
        }

    @property
    def digest(self) -> str:
        return _sha256({"rootfs": self.identity()})

    @property
    def ref(self) -> str:
        """The base's name in local image storage."""
        return f"{REPOSITORY}/base:{self.suite}-{self.digest.split(':')[1][:16]}"


DEFAULT_BASE = BaseSpec()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Composition:
    kind: str
    name: str
    requested: tuple[str, ...]
    closure: tuple[Manifest, ...]
    base: BaseSpec
    recipe: str  # the Containerfile, or the cloud-init user data for a VM
    digest: str
    env: Mapping[str, str]
    solvers: tuple[str, ...]
    utilities: tuple[str, ...]

    @property
    def packages(self) -> list[dict[str, str]]:
        return [{"name": m.name, "version": m.version} for m in self.closure]

    @property
    def layers(self) -> tuple[str, ...]:
        """The digests of its package layers, in install order (`layer_digests`)."""
        return layer_digests(kind=self.kind, packages=self.packages)

    @property
    def ref(self) -> str:
        """The image's tag in local storage: repository/name:first 16 hex digits of the digest."""
        return f"{REPOSITORY}/{self.name}:{self.digest.split(':')[1][:16]}"

    @property
    def display(self) -> str:
        return f"{self.name}@{self.digest[:19]}…"

    @property
    def labels(self) -> dict[str, str]:
        return {
            f"{LABEL_PREFIX}.digest": self.digest,
            f"{LABEL_PREFIX}.name": self.name,
            f"{LABEL_PREFIX}.packages": ",".join(f"{m.name}={m.version}" for m in self.closure),
            f"{LABEL_PREFIX}.solvers": ",".join(self.solvers),
            f"{LABEL_PREFIX}.base": self.base.digest,
            f"{LABEL_PREFIX}.recipe": str(RECIPE_VERSION),
            "org.opencontainers.image.title": self.name,
            "org.opencontainers.image.description": "Windtunnel solver image: "
            + ", ".join(f"{m.name} {m.version}" for m in self.closure),
        }

    def provider(self, executable: str) -> Manifest | None:
        """The package of the closure that provides a solver or utility."""
        for m in self.closure:
            if executable in m.solvers or executable in m.utilities:
                return m
        return None

    def write_context(self, directory: Path) -> Path:
        """Write the build context (Containerfile + files/<package>/<dest path>); return it."""
        if self.kind != "container":
            raise ValueError("only container compositions have a build context")
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "Containerfile").write_text(self.recipe, encoding="utf-8")
        for m in self.closure:
            for entry in m.file_entries:
                target = directory / "files" / m.name / entry.dest.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(entry.source, target)
                os.chmod(target, entry.mode)
        return directory


def _image_name(closure: tuple[Manifest, ...]) -> str:
    """A readable name from the closure: the packages nothing else in it depends on."""
    needed = {d.name for m in closure for d in m.depends}
    names = {m.name for m in closure}
    leaves = sorted(names - needed - set(IMPLICIT_PACKAGES) - {"openfoam-core"})
    prefix = "openfoam" if "openfoam-core" in names else ""
    if not leaves:
        return "openfoam-core" if prefix else "-".join(sorted(names))[:60]
    name = "-".join(([prefix] if prefix else []) + leaves)
    return (
        name if len(name) <= 60 else name[:51] + "-" + hashlib.sha1(name.encode()).hexdigest()[:8]
    )


def _containerfile(closure: tuple[Manifest, ...], base: BaseSpec, env: Mapping[str, str]) -> str:
    lines = [
        f"# Windtunnel composer recipe v{RECIPE_VERSION}: "
        + ", ".join(f"{m.name} {m.version}" for m in closure),
        f"FROM {base.ref}",
    ]
    for m in closure:
        steps = []
        if m.debian:
            steps.append(
                "RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                "--no-install-recommends " + " ".join(m.debian) + " && apt-get clean && "
                "rm -rf /var/lib/apt/lists/*"
            )
        if m.file_entries:
            steps.append(f"COPY files/{m.name}/ /")
        if steps:
            lines.append(f"# {m.name} {m.version}")
            lines.extend(steps)
    if env:
        lines.append("ENV " + " ".join(f"{k}={json.dumps(v)}" for k, v in sorted(env.items())))
    return "\n".join(lines) + "\n"


def lean_python(source: bytes) -> bytes:
    """Python source without its comments, its functions', classes' and module's
    docstrings (the module's stays when the module reads `__doc__`: a program's --help may
    print it), its functions' annotations, what only a type checker reads (the bodies of
    `if TYPE_CHECKING:`) and its `__all__`: the same program, less than half the size. The VM recipe
    carries its packages inside the cloud-init user data, which a cloud limits to 64 KiB.
    Annotations of class bodies stay (dataclasses and named tuples read them)."""
    tree = ast.parse(source)
    keep_module_doc = b"__doc__" in source
    # `__all__` is read by `import *` and by linters, neither of which runs in an image
    tree.body = [
        node
        for node in tree.body
        if not (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        )
    ] or [ast.Pass()]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            or (isinstance(node, ast.Module) and not keep_module_doc)
        ) and _starts_with_docstring(node.body):
            node.body = node.body[1:] or [ast.Pass()]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            node.returns = None
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None:
                    arg.annotation = None
            node.body = [_unannotated(statement) for statement in node.body]
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        ):
            node.body = [ast.Pass()]
    return (ast.unparse(tree) + "\n").encode()


def _unannotated(statement: ast.stmt) -> ast.stmt:
    """A function's `name: T = value` as `name = value` (`name: T` alone: nothing)."""
    if not isinstance(statement, ast.AnnAssign):
        return statement
    if statement.value is None:
        return ast.Pass()
    return ast.copy_location(
        ast.Assign(targets=[statement.target], value=statement.value), statement
    )


def _starts_with_docstring(body: list[ast.stmt]) -> bool:
    return bool(
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )


def _tar_xz(entries: Iterable[Any]) -> bytes:
    """A reproducible .tar.xz of a package's files (paths relative to /, mtime 0, root-owned;
    Python source lean, lean_python). xz, not gzip: the payload is base64 in user data that
    a cloud caps at 64 KiB, and xz packs the agent's source an eighth smaller."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            data = entry.source.read_bytes()
            if entry.dest.endswith(".py"):
                data = lean_python(data)
            info = tarfile.TarInfo(entry.dest.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), entry.mode, 0
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    return lzma.compress(raw.getvalue(), preset=9 | lzma.PRESET_EXTREME)


def _cloud_config(
    closure: tuple[Manifest, ...], base: BaseSpec, env: Mapping[str, str], *, poweroff: bool
) -> str:
    debian = [p for m in closure for p in m.debian]
    files: list[dict[str, Any]] = []
    runcmd: list[list[str]] = []
    for m in closure:
        if m.file_entries:
            path = f"/var/lib/windtunnel/payload/{m.name}.tar.xz"
            files.append(
                {
                    "path": path,
                    "encoding": "b64",
                    "permissions": "0644",
                    "content": base64.b64encode(_tar_xz(m.file_entries)).decode(),
                }
            )
            # python3 (every closure has it: the agent's) unpacks xz without xz-utils, which
            # a base cloud image need not have
            runcmd.append(["python3", "-c", UNPACK, path, "/"])
    env_lines = "".join(f"{k}={v}\n" for k, v in sorted(env.items()))
    files += [
        {"path": "/etc/windtunnel/env", "permissions": "0644", "content": env_lines},
        {
            "path": "/etc/profile.d/windtunnel.sh",
            "permissions": "0644",
            "content": "".join(f"export {k}={json.dumps(v)}\n" for k, v in sorted(env.items())),
        },
    ]
    runcmd.append(["touch", "/etc/windtunnel/ready"])
    config: dict[str, Any] = {
        "package_update": True,
        "packages": sorted(dict.fromkeys(debian)),
        "write_files": files,
        "runcmd": runcmd,
    }
    if poweroff:
        config["power_state"] = {
            "mode": "poweroff",
            "message": "windtunnel image baked",
            "condition": True,
        }
    header = (
        "#cloud-config\n"
        f"# Windtunnel composer recipe v{RECIPE_VERSION} for {base.cloud_image}: "
        + ", ".join(f"{m.name} {m.version}" for m in closure)
        + "\n# Boot the base cloud image with this user data; when the server shuts off,"
        " snapshot it.\n"
    )
    return header + yaml.safe_dump(config, sort_keys=True, width=1_000_000)


def compose(
    requested: Iterable[str | Requirement],
    catalog: Catalog,
    *,
    kind: str = "container",
    base: BaseSpec = DEFAULT_BASE,
    implicit: Iterable[str] = IMPLICIT_PACKAGES,
    poweroff: bool = True,
) -> Composition:
    """Resolve `requested` (plus the implicit packages) and make the recipe and digest."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    asked = [str(r) for r in requested]
    implicit = [p for p in implicit if catalog.versions(p)]
    resolution = resolve([*asked, *[p for p in implicit if p not in asked]], catalog)
    closure = resolution.closure
    env: dict[str, str] = {}
    for m in closure:
        env.update(m.env)
    if kind == "container":
        recipe = _containerfile(closure, base, env)
        base_identity: dict[str, Any] = {"rootfs": base.identity(), "digest": base.digest}
    else:
        recipe = _cloud_config(closure, base, env, poweroff=poweroff)
        base_identity = {"cloud_image": base.cloud_image}
    digest = _sha256(
        {
            "recipe_version": RECIPE_VERSION,
            "kind": kind,
            "base": base_identity,
            "packages": [m.build_identity() for m in closure],
            "recipe": recipe,
        }
    )
    return Composition(
        kind=kind,
        name=_image_name(closure),
        requested=tuple(sorted({parse_requirement(a).name for a in asked})),
        closure=closure,
        base=base,
        recipe=recipe,
        digest=digest,
        env=env,
        solvers=tuple(dict.fromkeys(s for m in closure for s in m.solvers)),
        utilities=tuple(dict.fromkeys(u for m in closure for u in m.utilities)),
    )
