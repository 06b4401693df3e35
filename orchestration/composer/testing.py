"""The one image the test suites and benchmarks share, so a CI run builds it at most once.

`openfoam-icofoam-meshing` = icofoam + meshing (+ openfoam-core, decomposition and
windtunnel-agent): enough for the cavity template serial and parallel. Its digest changes only
when those manifests or the agent's files change; the base rootfs and the OpenFOAM layer stay
cached (WINDTUNNEL_CACHE_DIR, buildah's storage) across checkouts.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

from orchestration.composer.build import Buildah, BuildResult
from orchestration.composer.manifest import load_catalog
from orchestration.composer.recipe import Composition, compose

ROOT = Path(__file__).resolve().parents[2]
TEST_PACKAGES = ("icofoam", "meshing")


def image_tools_missing() -> str:
    """Why real image builds and container runs cannot happen here ("" when they can)."""
    missing = [t for t in ("buildah", "podman") if not shutil.which(t)]
    if missing:
        return f"{' and '.join(missing)} not installed (scripts/image-tools installs them)"
    if os.geteuid() != 0 and not shutil.which("debootstrap"):
        return "debootstrap is missing"
    return ""


def shared_composition(packages_dir: Path | None = None) -> Composition:
    return compose(TEST_PACKAGES, load_catalog(packages_dir or ROOT / "packages"))


@functools.lru_cache(maxsize=1)
def ensure_shared_image() -> BuildResult:
    """Build the shared test image, or find it (same digest → no rebuild)."""
    log_dir = Path(os.environ.get("WINDTUNNEL_CACHE_DIR") or Buildah().cache_dir) / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    with (log_dir / "test-image-build.log").open("a") as log:
        return Buildah().build(
            shared_composition(), log=lambda line: print(line, file=log, flush=True)
        )
