"""Packages and templates synced from the repository into the catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog.models import Package
from catalog.services import packages_sync
from core.exceptions import ApplicationError

ROOT = Path(__file__).resolve().parents[3]


# -- package sync -------------------------------------------------------------------------------


def test_sync_rejects_an_invalid_manifest_naming_file_and_field(db, tmp_path: Path) -> None:
    folder = tmp_path / "packages" / "broken"
    folder.mkdir(parents=True)
    manifest = folder / "package.yaml"
    manifest.write_text(
        (ROOT / "packages/icofoam/package.yaml").read_text().replace("name: icofoam", "name: broken")
        .replace('version: "1912"', "version: 1912")
    )  # fmt: skip
    with pytest.raises(ApplicationError) as info:
        packages_sync(root=tmp_path / "packages")
    assert info.value.field == "version"
    assert info.value.message.startswith(f"{manifest}: version: 1912 is not of type 'string'")


def test_sync_stores_every_shipped_package(catalog) -> None:
    names = set(Package.objects.filter(retired=False).values_list("name", flat=True))
    assert {"openfoam-core", "rhosimplefoam", "buoyantsimplefoam", "windtunnel-agent"} <= names
