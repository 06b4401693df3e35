"""Catalog sync: packages from `packages/`, templates from `templates/`, the local backend."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import yaml
from django.conf import settings
from django.db import transaction

from catalog.models import Backend, CaseTemplate, Package
from core.exceptions import ApplicationError
from orchestration.case import render
from orchestration.composer import ManifestError, load_manifest


def _load_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ApplicationError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ApplicationError(f"{path}: expected a mapping at the top")
    return data


@transaction.atomic
def packages_sync(*, root: Path | None = None) -> list[Package]:
    root = Path(root or settings.WINDTUNNEL["PACKAGES_DIR"])
    seen = []
    for manifest in sorted(root.glob("*/package.yaml")):
        try:  # packages/package.schema.json and the composer's rules; names file and field
            data = dict(load_manifest(manifest).data)
        except ManifestError as exc:
            raise ApplicationError(str(exc), field=exc.field) from exc
        name = data["name"]
        package, _ = Package.objects.update_or_create(
            name=name,
            defaults={
                "version": str(data.get("version", "")),
                "description": str(data.get("description", "")),
                "depends": list(data.get("depends") or []),
                "provides": dict(data.get("provides") or {}),
                "install": dict(data.get("install") or {}),
                "env": dict(data.get("env") or {}),
                "run_configurations": dict(data.get("run_configurations") or {}),
                "manifest": data,
                "retired": False,
            },
        )
        seen.append(package)
    Package.objects.exclude(name__in=[p.name for p in seen]).update(retired=True)
    return seen


@transaction.atomic
def templates_sync(*, root: Path | None = None) -> list[CaseTemplate]:
    root = Path(root or settings.WINDTUNNEL["TEMPLATES_DIR"])
    seen = []
    for manifest in sorted(root.glob("*/template.yaml")):
        data = _load_yaml(manifest)
        name = data.get("name") or manifest.parent.name
        if name != manifest.parent.name:
            raise ApplicationError(f"{manifest}: name {name!r} must equal its folder name")
        if not (manifest.parent / "system" / "controlDict").exists():
            raise ApplicationError(f"{manifest.parent}: a template needs system/controlDict")
        template, _ = CaseTemplate.objects.update_or_create(
            name=name,
            defaults={
                "title": str(data.get("title") or name),
                "description": str(data.get("description") or ""),
                "path": str(manifest.parent.resolve()),
                "solver": str(data.get("solver") or ""),
                "spec": data,
                "placeholders": render.find_placeholders(manifest.parent),
                "retired": False,
            },
        )
        seen.append(template)
    CaseTemplate.objects.exclude(name__in=[t.name for t in seen]).update(retired=True)
    return seen


def backend_ensure_local() -> Backend:
    """The embedded default backend: this machine, sized from settings or the hardware."""
    cfg = settings.WINDTUNNEL
    cores = cfg["LOCAL_CORES"] or os.cpu_count() or 1
    memory = cfg["LOCAL_MEMORY_GB"] or round(psutil.virtual_memory().total / 1024**3, 1)
    backend, created = Backend.objects.get_or_create(
        name="local",
        defaults={"kind": "local", "cores": cores, "memory_gb": memory, "max_nodes": 1},
    )
    if not created and (cfg["LOCAL_CORES"] or cfg["LOCAL_MEMORY_GB"]):
        backend.cores, backend.memory_gb = cores, memory
        backend.save(update_fields=["cores", "memory_gb", "updated_at"])
    return backend


def catalog_sync() -> dict[str, int]:
    packages = packages_sync()
    templates = templates_sync()
    backend_ensure_local()
    return {"packages": len(packages), "templates": len(templates)}
