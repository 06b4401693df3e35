"""A run's identity: a content hash of what determines its result (docs/reuse.md).

Rendering is deterministic (orchestration.case.render: a sandboxed template engine, no clock, no
randomness), so the rendered case files are exactly determined by the case's source files and
the run's context. The identity is therefore computed in two parts:

- the study's part, once per submission (`identity_inputs`): the digest of every file of the
  case source, the solver, the resolved commands of each step, the decomposition, the process
  count, the run configuration's environment, the convergence policy (it ends runs early), the
  extra flow fields, and the image's content digest (or, on a backend without images, the
  versions of the packages installed on the portal's machine);
- the run's part: its context (parameters, constants and derived values) as canonical JSON;
  a warm-started run's also the identity of the run it started from, once that is picked at
  dispatch (warm_identity).

`run_identity(base, context_json)` is one SHA-256 of both: cheap enough to be computed for
every row of a 100,000-run submission as it is written (studies.bulk).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings

from catalog.models import Package
from orchestration.composer import IMPLICIT_PACKAGES

IDENTITY_FORMAT = "windtunnel-run-identity/1"


def case_digest(path: str | Path) -> str:
    """SHA-256 over every regular file under `path` (relative path and content, in path
    order); symbolic links and special files are left out, as the agent leaves them out."""
    root = Path(path)
    outer = hashlib.sha256()
    if not root.is_dir():
        return ""
    for file in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        inner = hashlib.sha256()
        with file.open("rb") as fh:
            while block := fh.read(1024 * 1024):
                inner.update(block)
        outer.update(str(file.relative_to(root)).encode() + b"\0" + inner.digest())
    return "sha256:" + outer.hexdigest()


def identity_inputs(
    *,
    case_dir: str,
    solver: str,
    steps: list[dict[str, Any]],
    decompose: dict[str, Any] | None,
    processes: int,
    env: dict[str, str],
    convergence: dict[str, Any],
    fields: list[str],
    image: Any,
    warm_start: bool = False,
) -> dict[str, Any]:
    """The study's part of every run's identity, as a readable record (it is shown in each
    run's provenance). `image`: the study's catalog Image, or None on a backend that runs the
    solver installed on its machine."""
    if image is not None:
        runtime: dict[str, Any] = {"image": image.name, "image_digest": image.digest}
    else:
        runtime = {
            "openfoam_dir": settings.WINDTUNNEL["OPENFOAM_DIR"],
            "packages": {
                name: version
                for name, version in Package.objects.filter(retired=False)
                .exclude(name__in=IMPLICIT_PACKAGES)
                .order_by("name")
                .values_list("name", "version")
            },
        }
    return {
        "format": IDENTITY_FORMAT,
        "case_digest": case_digest(case_dir),
        "solver": solver,
        "steps": [{"name": s["name"], "argv": list(s["argv"])} for s in steps],
        "processes": processes,
        "decompose": decompose,
        "env": dict(sorted(env.items())),
        "convergence": convergence,
        "fields": list(fields),
        **runtime,
        # a warm-started run's result depends on its start within the convergence tolerance:
        # it is not the same computation as a cold one (its source joins at dispatch)
        **({"warm_start": True} if warm_start else {}),
    }


def identity_base(inputs: dict[str, Any]) -> Any:
    """The study's part, hashed once: every run's hash goes on from a copy of it."""
    return hashlib.sha256(orjson.dumps(inputs, option=orjson.OPT_SORT_KEYS))


def context_json(context: dict[str, Any]) -> bytes:
    """A run's context as canonical JSON (sorted keys): the bytes its identity hashes."""
    return orjson.dumps(context, option=orjson.OPT_SORT_KEYS)


def run_identity(base: Any, context: bytes) -> str:
    """The run's identity (64 hex digits): SHA-256 of the study's canonical inputs followed
    by the run's canonical context (`base` is identity_base's hash of the former)."""
    digest = base.copy()
    digest.update(context)
    return digest.hexdigest()


def warm_identity(identity: str, source_identity: str) -> str:
    """A warm-started run's identity: its own and its source's (studies.warm)."""
    return hashlib.sha256(f"{identity}+warm:{source_identity}".encode()).hexdigest()
