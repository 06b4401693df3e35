"""OCI builds with buildah: the base root filesystem, then the composition on top.

- The base rootfs is made with debootstrap, kept as a tar in the cache directory under its
  digest, and imported into buildah's storage as `localhost/windtunnel/base:<suite>-<hex>`.
- The composition is built from its Containerfile with `buildah bud --isolation chroot
  --layers`: one layer per package that installs something, in install order, so
  compositions that share foundations share layers (and their cached builds).
- Same digest, no rebuild: an image carrying the label `org.windtunnel.digest=<digest>` is
  reused as it is.
- Builds of one digest (and of one base) are serialised by file locks in the cache
  directory, across processes: a second builder waits, then finds the image ready.

Output lines go to a `log` callback as they come; `progress` gets an estimate in [0, 1].
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypedDict

from orchestration.composer.recipe import LABEL_PREFIX, BaseSpec, Composition

__all__ = [
    "BuildError",
    "BuildResult",
    "Buildah",
    "LocalImage",
    "Progress",
    "default_cache_dir",
]

LogFn = Callable[[str], None]
ProgressFn = Callable[[float], None]
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_TIMEOUT = 1200.0
BUILD_TIMEOUT = 3600.0
LOCK_TIMEOUT = 3600.0
IMAGES_TRIES = 5  # listings of the image store, against images removed meanwhile


def default_cache_dir() -> Path:
    """WINDTUNNEL_CACHE_DIR, else /var/cache/windtunnel when writable, else ~/.cache/windtunnel.

    It outlives a checkout on purpose: a fresh clone (CI) reuses the base rootfs built before.
    """
    configured = os.environ.get("WINDTUNNEL_CACHE_DIR")
    if configured:
        return Path(configured)
    system = Path("/var/cache/windtunnel")
    try:
        system.mkdir(parents=True, exist_ok=True)
        if os.access(system, os.W_OK):
            return system
    except OSError:
        pass
    return Path.home() / ".cache" / "windtunnel"


class BuildError(RuntimeError):
    def __init__(self, message: str, *, log_tail: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.log_tail = list(log_tail)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BuildResult:
    digest: str
    ref: str
    image_id: str
    size_bytes: int
    cached: bool  # an image of this digest was already there: nothing was built
    base_cached: bool
    seconds: float


class LocalImage(TypedDict):
    """An image in the local store, as `Buildah.find` gives it."""

    id: str
    names: list[str]
    size_bytes: int


@contextlib.contextmanager
def file_lock(
    path: Path, *, timeout: float = LOCK_TIMEOUT, log: LogFn | None = None
) -> Iterator[None]:
    """An exclusive flock on `path` (created), waited for up to `timeout` seconds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        deadline = time.monotonic() + timeout
        told = False
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if log and not told:
                    log(f"waiting for another build holding {path.name}")
                    told = True
                if time.monotonic() > deadline:
                    raise BuildError(f"timed out waiting for the lock {path}") from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class Progress:
    """Turns build output into a monotonic estimate in [0, 1].

    Weights: the base rootfs (when it has to be made) and each Containerfile step; an apt
    step moves with apt's own output (Get/Unpacking/Setting up of the N packages it
    announced), other steps count when they start and end.
    """

    APT_WEIGHT, COPY_WEIGHT, OTHER_WEIGHT, COMMIT_WEIGHT, BASE_WEIGHT = 10.0, 0.5, 0.05, 1.0, 8.0
    _STEP = re.compile(r"^STEP (\d+)/(\d+): (\w+)")
    _NEW = re.compile(r"(\d+) newly installed")
    _APT = re.compile(r"^(Get:\d+ |Unpacking |Setting up )")
    _DEBOOTSTRAP = (
        ("I: Retrieving", 0.1),
        ("I: Validating", 0.15),
        ("I: Extracting", 0.3),
        ("I: Installing", 0.45),
        ("I: Unpacking", 0.6),
        ("I: Configuring", 0.8),
        ("I: Base system installed", 0.9),
    )

    def __init__(
        self, recipe: str, *, with_base: bool, labels: int = 0, report: ProgressFn | None = None
    ) -> None:
        self.report = report or (lambda _: None)
        self.weights: list[float] = []
        for line in recipe.splitlines():
            word = line.split(" ", 1)[0]
            if word == "RUN" and "apt-get install" in line:
                self.weights.append(self.APT_WEIGHT)
            elif word in ("COPY", "ADD"):
                self.weights.append(self.COPY_WEIGHT)
            elif word and not word.startswith("#"):
                self.weights.append(self.OTHER_WEIGHT)
        self.weights += [self.OTHER_WEIGHT] * labels  # buildah adds a LABEL step per --label
        self.base_weight = self.BASE_WEIGHT if with_base else 0.0
        self.total = self.base_weight + sum(self.weights) + self.COMMIT_WEIGHT
        self.done = 0.0  # weight of finished parts
        self.current = -1  # step index (0-based) in progress
        self.fraction = 0.0
        self.apt_total = 0
        self.apt_seen = 0
        self.value = 0.0

    def _emit(self) -> None:
        partial = (
            self.weights[self.current] * self.fraction
            if 0 <= self.current < len(self.weights)
            else 0.0
        )
        value = min(0.99, (self.done + partial) / self.total)
        if value > self.value + 1e-4:
            self.value = value
            self.report(round(value, 4))

    def base_line(self, line: str) -> None:
        for marker, fraction in self._DEBOOTSTRAP:
            if line.startswith(marker):
                self.done = max(self.done, self.base_weight * fraction)
                self._emit()

    def base_done(self) -> None:
        self.done = max(self.done, self.base_weight)
        self._emit()

    def line(self, line: str) -> None:
        step = self._STEP.match(line)
        if step:
            index = int(step.group(1)) - 1
            if 0 <= self.current < len(self.weights):
                self.done += self.weights[self.current]
            self.current, self.fraction = min(index, len(self.weights) - 1), 0.0
            self.apt_total = self.apt_seen = 0
        elif line.startswith("COMMIT") or line.startswith("Getting image source signatures"):
            if 0 <= self.current < len(self.weights):
                self.done += self.weights[self.current]
                self.current = len(self.weights)
        elif (new := self._NEW.search(line)) is not None:
            self.apt_total = int(new.group(1))
        elif self.apt_total and self._APT.match(line):
            self.apt_seen += 1
            self.fraction = min(1.0, self.apt_seen / (3 * self.apt_total))
        else:
            return
        self._emit()

    def finish(self) -> None:
        self.value = 1.0
        self.report(1.0)


def _size_to_bytes(text: str) -> int:
    match = re.match(r"^\s*([\d.]+)\s*([kKMGT]?B)\s*$", str(text))
    if not match:
        return 0
    factor = {"B": 1, "kB": 1000, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4}
    return int(float(match.group(1)) * factor.get(match.group(2), 1))


class Buildah:
    """buildah on this host. `storage_driver` (e.g. "vfs") only when storage.conf must be overridden."""

    def __init__(
        self,
        *,
        binary: str = "buildah",
        storage_driver: str | None = None,
        isolation: str = "chroot",
        cache_dir: Path | str | None = None,
        mirror: str | None = None,
    ) -> None:
        self.binary = binary
        self.storage_driver = storage_driver or os.environ.get("WINDTUNNEL_STORAGE_DRIVER") or None
        self.isolation = isolation
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.mirror = mirror or os.environ.get("WINDTUNNEL_DEBIAN_MIRROR") or DEFAULT_MIRROR

    # -- plumbing -------------------------------------------------------------------------

    def cmd(self, *args: str) -> list[str]:
        out = [self.binary]
        if self.storage_driver:
            out += ["--storage-driver", self.storage_driver]
        return [*out, *args]

    def _run(self, *args: str, timeout: float = 300.0) -> str:
        try:
            proc = subprocess.run(
                self.cmd(*args), capture_output=True, text=True, timeout=timeout, check=False
            )
        except FileNotFoundError:
            raise BuildError(f"{self.binary} is not installed (apt-get install buildah)") from None
        except subprocess.TimeoutExpired:
            raise BuildError(f"{' '.join(args[:2])} timed out after {timeout:g} s") from None
        if proc.returncode != 0:
            raise BuildError(
                f"{self.binary} {' '.join(args[:3])} failed ({proc.returncode}): "
                f"{(proc.stderr or proc.stdout).strip()[-2000:]}"
            )
        return proc.stdout

    def _stream(
        self,
        argv: list[str],
        *,
        log: LogFn,
        on_line: LogFn | None = None,
        timeout: float,
        cwd: Path | None = None,
    ) -> None:
        """Run argv, passing each output line to `log` (and `on_line`); BuildError on failure."""
        tail: list[str] = []
        log("$ " + " ".join(argv))
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                bufsize=1,
                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
            )
        except FileNotFoundError:
            raise BuildError(f"{argv[0]} is not installed") from None
        deadline = time.monotonic() + timeout
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            log(line)
            tail = [*tail[-39:], line]
            if on_line:
                on_line(line)
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise BuildError(f"{argv[0]} timed out after {timeout:g} s", log_tail=tail)
        code = proc.wait()
        if code != 0:
            raise BuildError(f"{os.path.basename(argv[0])} exited with code {code}", log_tail=tail)

    # -- queries ----------------------------------------------------------------------------

    def find(self, digest: str) -> LocalImage | None:
        """The local image labelled with `digest`: {id, names, size_bytes}, or None."""
        out = self._images("--filter", f"label={LABEL_PREFIX}.digest={digest}")
        images = json.loads(out or "[]") or []
        if not images:
            return None
        image = sorted(images, key=lambda i: i.get("created", 0))[-1]
        return LocalImage(
            id=image["id"],
            names=image.get("names") or [],
            size_bytes=_size_to_bytes(image.get("size", "")),
        )

    def _images(self, *args: str) -> str:
        """`buildah images --json …`. The listing reads every image of the store, and one
        removed meanwhile (another build's clean-up, the image GC) fails it with "image not
        known": listed again, the store no longer has it."""
        for attempt in range(1, IMAGES_TRIES):
            try:
                return self._run("images", "--json", *args)
            except BuildError as exc:
                if "image not known" not in str(exc):
                    raise
                time.sleep(0.2 * attempt)
        return self._run("images", "--json", *args)

    def exists(self, ref: str) -> bool:
        try:
            self._run("inspect", "--type", "image", "--format", "{{.FromImageID}}", ref)
            return True
        except BuildError:
            return False

    def labels(self, ref: str) -> dict[str, str]:
        out = self._run("inspect", "--type", "image", ref)
        data = json.loads(out)
        return dict((data.get("OCIv1") or {}).get("config", {}).get("Labels") or {})

    def size_bytes(self, ref: str) -> int:
        """The image's size: podman's exact byte count when podman is there, else buildah's."""
        podman = shutil.which("podman")
        if podman:
            cmd = [podman]
            if self.storage_driver:
                cmd += ["--storage-driver", self.storage_driver]
            proc = subprocess.run(
                [*cmd, "image", "inspect", "--format", "{{.Size}}", ref],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode == 0 and proc.stdout.strip().isdigit():
                return int(proc.stdout.strip())
        out = self._images(ref)
        images = json.loads(out or "[]") or [{}]
        return _size_to_bytes(images[0].get("size", ""))

    def remove(self, ref: str) -> bool:
        try:
            self._run("rmi", ref)
            return True
        except BuildError:
            return False

    # -- the base root filesystem -----------------------------------------------------------

    def base_tar(self, base: BaseSpec) -> Path:
        return self.cache_dir / "base" / base.digest.split(":")[1] / "rootfs.tar"

    def ensure_base(
        self, base: BaseSpec, *, log: LogFn = print, progress: Progress | None = None
    ) -> bool:
        """Make sure the base image is in local storage; True when it already was (or its tar)."""
        if self.exists(base.ref):
            log(f"base {base.ref} is present")
            return True
        hexdigest = base.digest.split(":")[1]
        with file_lock(self.cache_dir / "locks" / f"base-{hexdigest}.lock", log=log):
            if self.exists(base.ref):
                log(f"base {base.ref} is present")
                return True
            tar = self.base_tar(base)
            cached = tar.is_file()
            if cached:
                log(f"base rootfs from the cache: {tar}")
            else:
                self._debootstrap(base, tar, log=log, progress=progress)
            self._import_base(base, tar, log=log)
            return cached

    def _debootstrap(
        self, base: BaseSpec, tar: Path, *, log: LogFn, progress: Progress | None
    ) -> None:
        if not shutil.which("debootstrap"):
            raise BuildError("debootstrap is not installed (apt-get install debootstrap)")
        if os.geteuid() != 0:
            raise BuildError(
                "making the base rootfs needs root (debootstrap); run scripts/build-base-rootfs as root"
            )
        tar.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="rootfs-", dir=tar.parent))
        try:
            argv = ["debootstrap", f"--variant={base.variant}"]
            if base.include:
                argv.append("--include=" + ",".join(base.include))
            argv += [base.suite, str(work / "rootfs"), self.mirror]
            started = time.monotonic()
            self._stream(
                argv,
                log=log,
                on_line=progress.base_line if progress else None,
                timeout=BASE_TIMEOUT,
            )
            rootfs = work / "rootfs"
            for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
                for item in (rootfs / junk).glob("*"):
                    if item.is_file() and item.name not in ("lock",):
                        item.unlink()
            partial = tar.with_suffix(".tar.part")
            subprocess.run(
                ["tar", "--numeric-owner", "--xattrs", "-C", str(rootfs), "-cf", str(partial), "."],
                check=True,
                capture_output=True,
            )
            partial.replace(tar)
            (tar.parent / "base.json").write_text(
                json.dumps(
                    {
                        "spec": base.identity(),
                        "digest": base.digest,
                        "mirror": self.mirror,
                        "seconds": round(time.monotonic() - started, 1),
                    },
                    indent=2,
                )
            )
            log(
                f"base rootfs cached: {tar} ({tar.stat().st_size // 1024**2} MB, "
                f"{time.monotonic() - started:.0f} s)"
            )
        except subprocess.CalledProcessError as exc:
            raise BuildError(f"tar of the base rootfs failed: {exc.stderr!r}") from None
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _import_base(self, base: BaseSpec, tar: Path, *, log: LogFn) -> None:
        log(f"importing the base rootfs as {base.ref}")
        ctr = self._run("from", "--pull=never", "scratch").strip()
        try:
            self._run("add", ctr, str(tar), "/", timeout=900)
            self._run(
                "config",
                "--env",
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "--env",
                "LANG=C.UTF-8",
                "--cmd",
                "/bin/bash",
                "--label",
                f"{LABEL_PREFIX}.base={base.digest}",
                "--label",
                f"{LABEL_PREFIX}.base.suite={base.suite}",
                ctr,
            )
            self._run("commit", "--rm", ctr, base.ref, timeout=900)
        except BuildError:
            with contextlib.suppress(BuildError):
                self._run("rm", ctr)
            raise

    # -- compositions -------------------------------------------------------------------------

    def build(
        self,
        composition: Composition,
        *,
        log: LogFn = print,
        progress: ProgressFn | None = None,
        force: bool = False,
    ) -> BuildResult:
        """Build (or find) the image of `composition`. `force` rebuilds without the layer cache."""
        if composition.kind != "container":
            raise BuildError(
                "VM images are baked by the OpenStack backend from the cloud-init recipe"
            )
        started = time.monotonic()
        hexdigest = composition.digest.split(":")[1]
        if not force and (found := self._found(composition, log)) is not None:
            if progress:
                progress(1.0)
            return dataclasses.replace(found, seconds=time.monotonic() - started)
        with file_lock(self.cache_dir / "locks" / f"image-{hexdigest}.lock", log=log):
            if not force and (found := self._found(composition, log)) is not None:
                if progress:
                    progress(1.0)
                return dataclasses.replace(found, seconds=time.monotonic() - started)
            tracker = Progress(
                composition.recipe,
                with_base=not self.exists(composition.base.ref),
                labels=len(composition.labels),
                report=progress,
            )
            base_cached = self.ensure_base(composition.base, log=log, progress=tracker)
            tracker.base_done()
            context = Path(tempfile.mkdtemp(prefix=f"ctx-{hexdigest[:12]}-", dir=self._contexts()))
            try:
                composition.write_context(context)
                argv = self.cmd(
                    "bud",
                    "--isolation",
                    self.isolation,
                    "--layers",
                    "--pull=never",
                    "-f",
                    str(context / "Containerfile"),
                    "-t",
                    composition.ref,
                )
                if force:
                    argv.append("--no-cache")
                for key, value in sorted(composition.labels.items()):
                    argv += ["--label", f"{key}={value}"]
                argv.append(str(context))
                self._stream(argv, log=log, on_line=tracker.line, timeout=BUILD_TIMEOUT)
            finally:
                shutil.rmtree(context, ignore_errors=True)
            image = self.find(composition.digest)
            if image is None:
                raise BuildError("the build finished but no image carries its digest label")
            size = self.size_bytes(composition.ref) or image["size_bytes"]
            tracker.finish()
            log(
                f"built {composition.ref} ({size / 1e6:.0f} MB) in {time.monotonic() - started:.0f} s"
            )
            return BuildResult(
                digest=composition.digest,
                ref=composition.ref,
                image_id=image["id"],
                size_bytes=size,
                cached=False,
                base_cached=base_cached,
                seconds=time.monotonic() - started,
            )

    def _contexts(self) -> Path:
        path = self.cache_dir / "contexts"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _found(self, composition: Composition, log: LogFn) -> BuildResult | None:
        found = self.find(composition.digest)
        if found is None:
            return None
        wanted = composition.ref
        if wanted not in found["names"]:
            self._run("tag", found["id"], wanted)
        log(f"{wanted} is already built (same digest {composition.digest}): nothing to do")
        return BuildResult(
            digest=composition.digest,
            ref=wanted,
            image_id=found["id"],
            size_bytes=self.size_bytes(wanted) or found["size_bytes"],
            cached=True,
            base_cached=True,
            seconds=0.0,
        )
