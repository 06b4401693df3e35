"""The image composer: package manifests → dependency closure → digest → recipes → builds.

No Django here. The portal (backend/catalog/images.py), the tests and the benchmarks use the
same functions:

    catalog = load_catalog("packages")
    composition = compose(["icofoam", "meshing"], catalog)          # + windtunnel-agent
    composition.digest, composition.recipe                          # Containerfile
    compose(["icofoam"], catalog, kind="vm").recipe                  # cloud-init user data
    Buildah().build(composition, log=print, progress=print)          # real OCI build
"""

from orchestration.composer.build import (
    Buildah,
    BuildError,
    BuildResult,
    Progress,
    default_cache_dir,
)
from orchestration.composer.manifest import (
    SCHEMA_PATH,
    Catalog,
    Manifest,
    ManifestError,
    load_catalog,
    load_manifest,
    parse_requirement,
    render_argv,
    validate_manifest,
    version_key,
)
from orchestration.composer.recipe import (
    DEFAULT_BASE,
    IMPLICIT_PACKAGES,
    KINDS,
    LABEL_PREFIX,
    BaseSpec,
    Composition,
    compose,
    layer_digests,
)
from orchestration.composer.resolve import Resolution, ResolveError, resolve

__all__ = [
    "DEFAULT_BASE",
    "IMPLICIT_PACKAGES",
    "KINDS",
    "LABEL_PREFIX",
    "SCHEMA_PATH",
    "BaseSpec",
    "BuildError",
    "BuildResult",
    "Buildah",
    "Catalog",
    "Composition",
    "Manifest",
    "ManifestError",
    "Progress",
    "Resolution",
    "ResolveError",
    "compose",
    "default_cache_dir",
    "layer_digests",
    "load_catalog",
    "load_manifest",
    "parse_requirement",
    "render_argv",
    "resolve",
    "validate_manifest",
    "version_key",
]
