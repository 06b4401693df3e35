"""Image composition: build time cold vs cached, image sizes, run start latency.

    make bench NAME=compose_build        (or: .venv/bin/python -m bench.compose_build)

1. compose + build of one composition from nothing (its own base rootfs, so the shared caches
   of the test suite stay untouched: debootstrap + apt + commit), then the same digest again
   (compose + "same digest → no rebuild"), 5 times: compose_cached_speedup = cold / cached.
2. compositions that share the OpenFOAM layers with one already built (a new digest that
   reuses the layer cache): build time and image size of each.
3. run start latency (start → the agent's `running` report) of the container backend: the
   image present, vs the image removed and built first (layers cached); the local backend's
   agent start is the baseline.

Needs buildah, podman, debootstrap and root (scripts/image-tools). Takes about 4 minutes.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, emit, progress, sized
from orchestration.composer import BaseSpec, Buildah, compose, load_catalog
from orchestration.composer.testing import ensure_shared_image, image_tools_missing
from orchestration.drivers.base import Step
from orchestration.drivers.container import ContainerDriver
from orchestration.drivers.local import LocalDriver

# a base of its own: its digest differs from the default base's, so nothing of it is cached
BENCH_BASE = BaseSpec(include=("procps",))
CACHED_REPEATS = sized(5, 1)
START_REPEATS = sized(3, 1)


def _compose(packages, base=None):
    kwargs = {"base": base} if base else {}
    return compose(packages, load_catalog(ROOT / "packages"), **kwargs)


def _forget(buildah: Buildah, composition) -> None:
    """Remove an image and (for the bench base) its cached rootfs, so the next build is cold."""
    buildah.remove(composition.ref)
    if composition.base == BENCH_BASE:
        buildah.remove(BENCH_BASE.ref)
        shutil.rmtree(buildah.base_tar(BENCH_BASE).parent, ignore_errors=True)


def _portal():
    from orchestration.tests.conftest import FakePortal

    portal = FakePortal()
    portal.thread.start()
    return portal


def _start_latency(driver, image: str | None, work: Path) -> float:
    """Seconds from prepare() to the agent's `running` report."""
    from orchestration.tests.conftest import make_spec

    portal = _portal()
    case = work / "case"
    (case / "system").mkdir(parents=True, exist_ok=True)
    spec = make_spec(
        portal=portal,
        case_dir=case,
        work_dir=work / "run",
        steps=[Step(name="true", argv=("true",), role="solve")],
        **({"image": image} if image else {}),
    )
    started = time.monotonic()
    driver.prepare(spec)
    handle = driver.start(spec)
    try:
        if not portal.wait_for(lambda: "running" in portal.states(), timeout=120):
            raise RuntimeError(f"the agent never reported running; see {work / 'run'}")
        return time.monotonic() - started
    finally:
        portal.wait_for(lambda: "completed" in portal.states(), timeout=60)
        driver.collect(handle)
        portal.server.shutdown()
        portal.server.server_close()


def main() -> int:
    missing = image_tools_missing()
    if missing:
        print(f"compose_build: skipped: {missing}", file=sys.stderr)
        return 0
    buildah = Buildah()
    quiet = lambda _line: None  # noqa: E731

    # 1. cold vs cached, same digest
    cold_comp = _compose(["icofoam", "meshing"], base=BENCH_BASE)
    _forget(buildah, cold_comp)
    progress(f"cold build of {cold_comp.display} (own base rootfs, nothing cached)")
    t0 = time.monotonic()
    lines: list[str] = []
    cold = buildah.build(_compose(["icofoam", "meshing"], base=BENCH_BASE), log=lines.append)
    cold_s = time.monotonic() - t0
    base_s = next(
        (float(x.split(", ")[-1].split()[0]) for x in lines if x.startswith("base rootfs cached")),
        None,
    )
    cached_samples = []
    for _ in range(CACHED_REPEATS):
        t0 = time.monotonic()
        again = buildah.build(_compose(["icofoam", "meshing"], base=BENCH_BASE), log=quiet)
        cached_samples.append(time.monotonic() - t0)
        assert again.cached and again.image_id == cold.image_id
    cached_s = statistics.median(cached_samples)
    progress(f"cold {cold_s:.1f} s (base {base_s} s), cached {cached_s:.2f} s")

    # 2. compositions sharing layers with the shared test image
    shared = ensure_shared_image()
    sizes = {
        cold_comp.name + " (bench base)": cold.size_bytes,
        "openfoam-icofoam-meshing": shared.size_bytes,
    }
    shared_builds = {}
    for packages in (
        ["simplefoam", "meshing"],
        ["pimplefoam", "pisofoam", "potentialfoam"],
        ["buoyantsimplefoam", "rhosimplefoam"],
    ):
        comp = _compose(packages)
        buildah.remove(comp.ref)
        t0 = time.monotonic()
        result = buildah.build(comp, log=quiet)
        shared_builds[comp.name] = round(time.monotonic() - t0, 2)
        sizes[comp.name] = result.size_bytes
        progress(
            f"{comp.name}: {shared_builds[comp.name]} s (layers shared), {result.size_bytes / 1e6:.0f} MB"
        )

    # 3. run start latency
    with tempfile.TemporaryDirectory(prefix="wt-bench-") as tmp:
        work = Path(tmp)
        local = [
            _start_latency(LocalDriver(work_root=tmp), None, work / f"local{i}")
            for i in range(START_REPEATS)
        ]
        container = ContainerDriver(work_root=tmp)
        present = [
            _start_latency(container, shared.ref, work / f"present{i}")
            for i in range(START_REPEATS)
        ]
        built = []
        for i in range(START_REPEATS):
            comp = _compose(["simplefoam", "meshing"])
            buildah.remove(comp.ref)
            t0 = time.monotonic()
            ref = buildah.build(comp, log=quiet).ref
            build_s = time.monotonic() - t0
            built.append(build_s + _start_latency(container, ref, work / f"built{i}"))
    local_s, present_s, built_s = (statistics.median(x) for x in (local, present, built))
    progress(
        f"start: local {local_s:.2f} s, image present {present_s:.2f} s, image built first {built_s:.1f} s"
    )

    # leave the bench's own base and image out of storage (the tar cache is removed too)
    _forget(buildah, cold_comp)
    speedup = cold_s / cached_s
    emit(
        "compose_cached_speedup",
        speedup,
        "x",
        f"cold/cached compose+build of openfoam-icofoam-meshing ({cold_s:.0f} s / {cached_s:.2f} s), "
        f"{cold.size_bytes / 1e6:.0f} MB",
        cold_seconds=round(cold_s, 1),
        cold_base_rootfs_seconds=base_s,
        cached_seconds_median=round(cached_s, 3),
        cached_samples=[round(x, 3) for x in cached_samples],
        layer_shared_build_seconds=shared_builds,
        image_size_bytes=sizes,
        start_latency_seconds={
            "local_agent_baseline": round(local_s, 2),
            "container_image_present": round(present_s, 2),
            "container_image_built_first_layers_cached": round(built_s, 2),
            "container_image_built_first_cold_estimate": round(cold_s + present_s, 1),
            "samples": {"local": local, "present": present, "built": built},
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
