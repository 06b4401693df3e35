"""Real builds with buildah: the shared OpenFOAM image, cache hits, failures, concurrency.

The base rootfs and the shared image are cached outside the checkout (WINDTUNNEL_CACHE_DIR,
buildah's storage), so after the first build on a machine these tests take seconds.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
import yaml

from orchestration.composer import Buildah, BuildError, BuildResult, compose, load_catalog
from orchestration.composer.testing import (
    ensure_shared_image,
    image_tools_missing,
    shared_composition,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(image_tools_missing()), reason=image_tools_missing() or "ok"),
]


def _package(root: Path, name: str, **install) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "payload.txt").write_text(f"{name} payload\n")
    data = {
        "name": name,
        "version": "1.0",
        "description": f"test package {name}",
        "depends": [],
        "provides": {"solvers": [], "utilities": []},
        "install": {
            "debian": install.get("debian", []),
            "files": [{"src": "payload.txt", "dest": f"/opt/{name}/payload.txt"}],
        },
        "env": {"WT_TEST_PACKAGE": name},
    }
    (folder / "package.yaml").write_text(yaml.safe_dump(data))


def test_the_openfoam_image_is_built_once_and_carries_its_labels() -> None:
    result = ensure_shared_image()
    composition = shared_composition()
    buildah = Buildah()
    labels = buildah.labels(result.ref)
    assert labels["org.windtunnel.digest"] == composition.digest
    assert labels["org.windtunnel.packages"] == (
        "openfoam-core=1912,windtunnel-agent=0.1.0,decomposition=1912,meshing=1912,icofoam=1912"
    )
    assert labels["org.windtunnel.solvers"] == "icoFoam"
    again = buildah.build(composition, log=lambda _: None)
    assert again.cached and again.image_id == result.image_id and again.seconds < 10
    assert 200e6 < again.size_bytes < 2e9
    usage = subprocess.run(
        ["podman", "run", "--rm", "--runtime", "runc", "--ulimit", "nofile=1024:1024",
         "--ulimit", "nproc=1024:1024", "--network", "none", result.ref,
         "sh", "-c", "icoFoam -help && python3 -c 'import jinja2, orchestration.agent.main'"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert usage.returncode == 0, usage.stderr
    assert "Usage: icoFoam" in usage.stdout


def test_same_digest_no_rebuild_and_concurrent_builders_build_once(tmp_path: Path) -> None:
    _package(tmp_path / "packages", "wt-test-files")
    composition = compose(["wt-test-files"], load_catalog(tmp_path / "packages"), implicit=())
    buildah = Buildah()
    buildah.remove(composition.ref)
    results: list[BuildResult] = []
    logs: list[list[str]] = [[], []]

    def build(i: int) -> None:
        results.append(buildah.build(composition, log=logs[i].append))

    try:
        threads = [threading.Thread(target=build, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
        assert sorted(r.cached for r in results) == [False, True]
        assert len({r.image_id for r in results}) == 1
        assert any("already built" in line for log in logs for line in log)
        progress: list[float] = []
        third = buildah.build(composition, log=lambda _: None, progress=progress.append)
        assert third.cached and progress == [1.0]
        out = subprocess.run(
            ["podman", "run", "--rm", "--runtime", "runc", "--ulimit", "nofile=1024:1024",
             "--ulimit", "nproc=1024:1024", "--network", "none", composition.ref,
             "sh", "-c", "cat /opt/wt-test-files/payload.txt; echo $WT_TEST_PACKAGE"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert out.stdout.split() == ["wt-test-files", "payload", "wt-test-files"], out.stderr
    finally:
        buildah.remove(composition.ref)


def test_a_failed_build_raises_with_the_log_tail(tmp_path: Path) -> None:
    _package(tmp_path / "packages", "wt-test-broken", debian=["windtunnel-no-such-package"])
    composition = compose(["wt-test-broken"], load_catalog(tmp_path / "packages"), implicit=())
    lines: list[str] = []
    progress: list[float] = []
    with pytest.raises(BuildError, match="exited with code") as info:
        Buildah().build(composition, log=lines.append, progress=progress.append)
    assert any("Unable to locate package windtunnel-no-such-package" in x for x in lines)
    assert any("windtunnel-no-such-package" in x for x in info.value.log_tail)
    assert Buildah().find(composition.digest) is None
    assert all(p < 1.0 for p in progress)


def test_an_image_removed_while_the_store_is_listed_does_not_fail_a_lookup(tmp_path: Path) -> None:
    # buildah lists every image of the store; one removed meanwhile (another build's clean-up)
    # fails that listing with "image not known" the first time, and is gone from the next
    calls = tmp_path / "calls"
    binary = tmp_path / "buildah"
    binary.write_text(
        "#!/bin/sh\n"
        f'echo x >> "{calls}"\n'
        f'if [ "$(wc -l < "{calls}")" -lt 3 ]; then\n'
        '  echo \'Error: reading image "0028": locating image with ID "0028": image not known\' >&2\n'
        "  exit 125\n"
        "fi\n"
        'echo \'[{"id": "abc", "names": ["localhost/wt:1"], "size": "1.5 MB", "created": 1}]\'\n'
    )
    binary.chmod(0o755)
    found = Buildah(binary=str(binary)).find("sha256:feed")
    assert found == {"id": "abc", "names": ["localhost/wt:1"], "size_bytes": 1_500_000}
    assert len(calls.read_text().splitlines()) == 3
    # any other failure is reported at once
    binary.write_text("#!/bin/sh\necho 'Error: database is locked' >&2\nexit 125\n")
    with pytest.raises(BuildError, match="database is locked"):
        Buildah(binary=str(binary)).find("sha256:feed")
