"""The container driver: the run agent inside the study's image, on this host.

Runtime-agnostic: `runtime` is `podman` (default), `docker` (same CLI) or `buildah`
(`buildah run --isolation chroot` in a detached process group, for hosts with neither).
The command line is built by `container_argv()`, a pure function the tests check for each
runtime.

Inside the container:

    /wt/case      the study's case (template or upload), read-only
    /wt/work      the attempt's work directory (run.json, case/, logs, result archive)
    /scratch      a per-attempt scratch directory (`scratch_mount`; host side under `scratch`)
    + `mounts`    {container path: host path[:ro]} from the backend's settings

Network: the agent must reach the portal's ingest URL, so the default is the host's network
(`network: host`). Nothing else needs the network; a backend whose portal is reachable from a
container network can set `network` to that network and `portal_url` to the URL as seen
from inside. Resources: `--cpus` = the run's processes and `--memory` = its memory_gb (where
the runtime applies cgroup limits; buildah's chroot isolation does not).

Settings (the backend's `settings` JSON): runtime, runtime_path, runtime_args, oci_runtime
(podman/docker `--runtime`; "auto" picks runc on hybrid cgroup hosts where crun cannot run),
network, portal_url, mounts, scratch, scratch_mount, user ("host" = the portal's uid:gid,
"image" = the image's user, or "uid:gid"), limits (bool), ulimits ({name: "soft:hard"}),
shm_size, image (default image when a run has none), cores, memory_gb, work_root, grace,
storage_driver.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import secrets
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import psutil

from orchestration.drivers.base import (
    Capabilities,
    DriverBase,
    DriverContext,
    DriverError,
    RunPhase,
    RunSpec,
    RunStatus,
    register,
    write_private_json,
)
from orchestration.drivers.local import (
    ROOT_MPI_ENV,
    LocalDriver,
    format_handle,
    parse_handle,
    track_child,
)

__all__ = ["ContainerDriver", "container_argv", "CASE_MOUNT", "WORK_MOUNT"]

CASE_MOUNT = "/wt/case"
WORK_MOUNT = "/wt/work"
RUNTIMES = ("podman", "docker", "buildah")
# fixed text, no user input: the agent's output goes to the work dir like the local driver's
AGENT_COMMAND = (
    "sh",
    "-c",
    f"exec python3 -m orchestration.agent {WORK_MOUNT}/run.json >>{WORK_MOUNT}/agent.log 2>&1",
)
_PREFIX = "container:"
_CALL_TIMEOUT = 120.0
_LAST_PRUNE = -1e9


def _host_ulimits() -> dict[str, str]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = 65536
    hard = cap if hard == resource.RLIM_INFINITY else min(hard, cap)
    soft = hard if soft == resource.RLIM_INFINITY else min(soft, hard)
    # podman's own defaults (nofile 1048576, nproc 4194304) can exceed what a host allows
    return {"nofile": f"{soft}:{hard}", "nproc": "8192:8192"}


def _auto_oci_runtime() -> str | None:
    """runc on hybrid cgroup v1/v2 hosts (crun refuses them), else the runtime's default."""
    hybrid = os.path.ismount("/sys/fs/cgroup/unified") and os.path.isdir("/sys/fs/cgroup/memory")
    return "runc" if hybrid and shutil.which("runc") else None


def _split_mount(value: Any) -> tuple[str, bool]:
    text = str(value)
    if text.endswith(":ro"):
        return text[:-3], True
    if text.endswith(":rw"):
        return text[:-3], False
    return text, False


def container_argv(
    *,
    runtime: str,
    binary: str,
    image: str,
    name: str,
    work_dir: str,
    case_dir: str,
    scratch_dir: str | None,
    scratch_mount: str = "/scratch",
    mounts: Mapping[str, Any] | None = None,
    network: str | None = "host",
    cpus: float | None = None,
    memory_gb: float | None = None,
    user: str | None = None,
    env: Mapping[str, str] | None = None,
    ulimits: Mapping[str, str] | None = None,
    shm_size: str | None = None,
    labels: Mapping[str, str] | None = None,
    runtime_args: Sequence[str] = (),
    oci_runtime: str | None = None,
    command: Sequence[str] = AGENT_COMMAND,
) -> list[str]:
    """The command that starts the agent's container (detached for podman/docker)."""
    if runtime not in RUNTIMES:
        raise DriverError(
            f"unknown container runtime {runtime!r}; use one of {', '.join(RUNTIMES)}"
        )
    volumes = [f"{case_dir}:{CASE_MOUNT}:ro", f"{work_dir}:{WORK_MOUNT}"]
    if scratch_dir:
        volumes.append(f"{scratch_dir}:{scratch_mount}")
    for target, source in sorted((mounts or {}).items()):
        host, read_only = _split_mount(source)
        if not str(target).startswith("/") or not host.startswith("/"):
            raise DriverError(f"mounts: {target!r} → {source!r}: both paths must be absolute")
        volumes.append(f"{host}:{target}" + (":ro" if read_only else ""))
    env_args = [f"{k}={v}" for k, v in sorted((env or {}).items())]
    if runtime == "buildah":
        # buildah run works on a working container (`name`, made by `buildah from`); the chroot
        # isolation shares the host's network and applies no cgroup limits
        argv = [binary, *runtime_args, "run", "--isolation", "chroot"]
        for v in volumes:
            argv += ["-v", v]
        for e in env_args:
            argv += ["--env", e]
        if user:
            argv += ["--user", user]
        argv += ["--workingdir", WORK_MOUNT, name, "--", *command]
        return argv
    argv = [binary, *runtime_args]
    if oci_runtime:
        argv += ["--runtime", oci_runtime]
    argv += ["run", "-d", "--name", name, "--pull", "never", "--workdir", WORK_MOUNT]
    if runtime == "podman":
        argv += ["--http-proxy=false"]  # the agent reaches the portal directly
    if network:
        argv += ["--network", network]
    if cpus:
        argv += ["--cpus", f"{cpus:g}"]
    if memory_gb:
        argv += ["--memory", f"{max(int(memory_gb * 1024), 64)}m"]
    if shm_size:
        argv += ["--shm-size", shm_size]
    for key, value in sorted((ulimits or {}).items()):
        argv += ["--ulimit", f"{key}={value}"]
    if user:
        argv += ["--user", user]
    for key, value in sorted((labels or {}).items()):
        argv += ["--label", f"{key}={value}"]
    for v in volumes:
        argv += ["-v", v]
    for e in env_args:
        argv += ["-e", e]
    argv += [image, *command]
    return argv


@register("container")
class ContainerDriver(DriverBase):
    """The agent inside a composed OCI image on the portal's own host."""

    releases_early = True
    prerenders_case = True
    on_portal_host = True
    image_kind: ClassVar[str | None] = "container"  # as Driver declares it (not just str)
    sandbox: ClassVar[str] = "uid"  # the container is the run's own filesystem

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], context: DriverContext) -> ContainerDriver:
        base = {"cores": context.cores, "memory_gb": context.memory_gb}
        return cls(**{**base, "work_root": context.work_root, **settings})

    def __init__(
        self,
        *,
        runtime: str = "podman",
        runtime_path: str = "",
        runtime_args: Sequence[str] = (),
        oci_runtime: str | None = "auto",
        network: str | None = "host",
        portal_url: str = "",
        mounts: Mapping[str, Any] | None = None,
        scratch: str = "",
        scratch_mount: str = "/scratch",
        user: str = "host",
        limits: bool = True,
        ulimits: Mapping[str, str] | None = None,
        shm_size: str | None = "512m",
        image: str = "",
        cores: int | None = None,
        memory_gb: float | None = None,
        work_root: str = "",
        grace: float = 10.0,
        storage_driver: str = "",
        keep_exited: float = 3600.0,
        **ignored: object,
    ) -> None:
        if runtime not in RUNTIMES:
            raise DriverError(
                f"unknown container runtime {runtime!r}; use one of {', '.join(RUNTIMES)}"
            )
        self.runtime = runtime
        self.binary = runtime_path or runtime
        self.runtime_args = list(runtime_args)
        storage_driver = storage_driver or os.environ.get("WINDTUNNEL_STORAGE_DRIVER", "")
        if storage_driver and runtime in ("podman", "buildah"):
            self.runtime_args += ["--storage-driver", storage_driver]
        self.oci_runtime = (
            (_auto_oci_runtime() if oci_runtime == "auto" else oci_runtime)
            if runtime == "podman"
            else (None if oci_runtime == "auto" else oci_runtime)
        )
        self.network = network
        self.portal_url = portal_url
        self.mounts = dict(mounts or {})
        self.scratch = scratch
        self.scratch_mount = scratch_mount
        self.user = user
        self.limits = limits
        self.ulimits = _host_ulimits() if ulimits is None else dict(ulimits)
        self.shm_size = shm_size
        self.image = image
        self.cores = int(cores or os.cpu_count() or 1)
        self.memory_gb = float(memory_gb or psutil.virtual_memory().total / 1024**3)
        self.work_root = work_root
        self.grace = grace
        self.keep_exited = keep_exited
        self._local = LocalDriver(work_root=work_root, cores=self.cores, memory_gb=self.memory_gb)

    # -- Driver ---------------------------------------------------------------------------

    def prepare(self, spec: RunSpec) -> None:
        if spec.processes > self.cores:
            raise DriverError(f"the run needs {spec.processes} cores; this host has {self.cores}")
        image = self._image(spec)
        if not self._image_present(image):
            raise DriverError(
                f"image {image} is not in this host's {self.runtime} storage; build it first "
                "(the portal builds a study's image before its runs are admitted)"
            )
        work_dir = self._work_dir(spec)
        try:
            work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._scratch_dir(spec).mkdir(parents=True, exist_ok=True, mode=0o700)
            data = json.loads(spec.to_json(sandbox=self.sandbox))
            data.update(
                {
                    "case_dir": CASE_MOUNT,
                    "work_dir": WORK_MOUNT,
                    "portal_url": self.portal_url or spec.portal_url,
                    "mounts": {self.scratch_mount: str(self._scratch_dir(spec)), **self.mounts},
                    "image": image,
                }
            )
            write_private_json(work_dir / "run.json", data)
        except OSError as exc:
            raise DriverError(f"cannot prepare {work_dir}: {exc}", retryable=True) from exc

    def start(self, spec: RunSpec) -> str:
        work_dir = self._work_dir(spec)
        if not (work_dir / "run.json").is_file():
            raise DriverError(f"{work_dir / 'run.json'} is missing: call prepare() first")
        image = self._image(spec)
        self._prune()
        name = f"wt-{spec.run_id[:8]}-a{spec.attempt}-{secrets.token_hex(3)}"
        argv = self.argv(spec, image=image, name=name)
        if self.runtime == "buildah":
            return self._start_buildah(argv, image=image, name=name, work_dir=work_dir)
        proc = self._call(argv, timeout=_CALL_TIMEOUT)
        if proc.returncode != 0:
            self._call([*self._base(), "rm", "-f", name])
            raise DriverError(
                f"{self.runtime} could not start the container: {proc.stderr.strip()[-1500:]}",
                retryable=True,
            )
        return f"{_PREFIX}{self.runtime}:{name}"

    def poll(self, handle: str) -> RunStatus:
        parsed = self._parse(handle)
        if parsed is None:
            return RunStatus(phase=RunPhase.UNKNOWN, reason="not a container handle")
        runtime, name, process = parsed
        if runtime == "buildah":
            return self._local.poll(process) if process else RunStatus(phase=RunPhase.UNKNOWN)
        proc = self._call(
            [
                *self._base(),
                "inspect",
                "--type",
                "container",
                "--format",
                "{{.State.Status}}|{{.State.ExitCode}}",
                name,
            ]
        )
        if proc.returncode != 0:
            return RunStatus(phase=RunPhase.UNKNOWN, reason=f"no container {name}")
        status, _, code = proc.stdout.strip().partition("|")
        if status in ("running", "paused", "stopping"):
            return RunStatus(phase=RunPhase.RUNNING)
        if status in ("created", "configured", "initialized"):
            return RunStatus(phase=RunPhase.PENDING, reason=f"container {status}")
        exit_code = int(code) if code.strip().lstrip("-").isdigit() else None
        return RunStatus(phase=RunPhase.EXITED, exit_code=exit_code, reason=f"container {status}")

    def cancel(self, handle: str, *, grace: float | None = None) -> None:
        """SIGTERM the agent (PID 1 of the container); SIGKILL everything after `grace` s."""
        grace = self.grace if grace is None else grace
        parsed = self._parse(handle)
        if parsed is None:
            return
        runtime, name, process = parsed
        if runtime == "buildah":
            if process:
                self._local.cancel(process, grace=grace)
            return
        self._call(
            [*self._base(), "stop", "-t", str(max(int(round(grace)), 1)), name],
            timeout=grace + _CALL_TIMEOUT,
        )

    def collect(self, handle: str) -> None:
        parsed = self._parse(handle)
        if parsed is None:
            return
        runtime, name, process = parsed
        if runtime == "buildah":
            if process:
                self._local.collect(process)
            self._call([*self._base(), "rm", name])
            return
        self._call([*self._base(), "rm", "-f", name])

    def capabilities(self) -> Capabilities:
        return Capabilities(
            kind="container",
            cores=self.cores,
            memory_gb=round(self.memory_gb, 2),
            max_nodes=1,
            mpi=True,
            remote=False,
        )

    # -- helpers --------------------------------------------------------------------------

    def argv(self, spec: RunSpec, *, image: str, name: str) -> list[str]:
        user = self._user()
        env = {"PYTHONUNBUFFERED": "1", "WINDTUNNEL_SCRATCH": self.scratch_mount}
        if user in (None, "0:0") and (user is not None or os.geteuid() == 0):
            env.update(ROOT_MPI_ENV)
        if user not in (None, "0:0"):
            env["HOME"] = WORK_MOUNT
        limits = self.limits and self.runtime != "buildah"
        return container_argv(
            runtime=self.runtime,
            binary=self.binary,
            image=image,
            name=name,
            work_dir=str(self._work_dir(spec)),
            case_dir=str(Path(spec.case_dir).resolve()),
            scratch_dir=str(self._scratch_dir(spec)),
            scratch_mount=self.scratch_mount,
            mounts={**dict(spec.mounts or {}), **self.mounts},
            network=self.network,
            cpus=float(spec.processes) if limits else None,
            memory_gb=float(spec.memory_gb) if limits else None,
            user=user,
            env=env,
            ulimits=self.ulimits,
            shm_size=self.shm_size,
            labels={"org.windtunnel.run": spec.run_id, "org.windtunnel.attempt": str(spec.attempt)},
            runtime_args=self.runtime_args,
            oci_runtime=self.oci_runtime,
        )

    def _prune(self) -> None:
        """Remove our exited containers older than `keep_exited` s (the portal does not call
        collect() for every run); at most once a minute per process, best effort."""
        global _LAST_PRUNE
        if self.runtime == "buildah" or time.monotonic() - _LAST_PRUNE < 60:
            return
        _LAST_PRUNE = time.monotonic()
        with contextlib.suppress(DriverError):
            self._call(
                [*self._base(), "container", "prune", "-f", "--filter", "label=org.windtunnel.run",
                 "--filter", f"until={int(self.keep_exited)}s"]
            )  # fmt: skip

    def _user(self) -> str | None:
        if self.user == "image":
            return None
        if self.user == "host":
            return f"{os.getuid()}:{os.getgid()}"
        return self.user

    def _base(self) -> list[str]:
        return [self.binary, *self.runtime_args]

    def _image(self, spec: RunSpec) -> str:
        image = spec.image or self.image
        if not image:
            raise DriverError("the run names no image and the backend has no default image")
        return image

    def _image_present(self, image: str) -> bool:
        if self.runtime == "buildah":
            args = ["inspect", "--type", "image", image]
        elif self.runtime == "podman":
            args = ["image", "exists", image]
        else:
            args = ["image", "inspect", image]
        return self._call([*self._base(), *args]).returncode == 0

    def results_dir(self, spec: RunSpec) -> str | None:
        """The work directory is a host directory mounted into the container."""
        return str(self._work_dir(spec) / "case")

    def _work_dir(self, spec: RunSpec) -> Path:
        return self._local._work_dir(spec)

    def _scratch_dir(self, spec: RunSpec) -> Path:
        if self.scratch:
            return Path(self.scratch) / spec.run_id / f"attempt-{spec.attempt}"
        return self._work_dir(spec) / "scratch"

    def _call(
        self, argv: list[str], *, timeout: float = _CALL_TIMEOUT
    ) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                argv, capture_output=True, text=True, timeout=timeout, check=False
            )
        except FileNotFoundError:
            raise DriverError(
                f"{argv[0]} is not installed on this host (the container backend needs podman, "
                "docker or buildah)"
            ) from None
        except subprocess.TimeoutExpired:
            raise DriverError(f"{' '.join(argv[:3])} timed out", retryable=True) from None

    @staticmethod
    def _parse(handle: str) -> tuple[str, str, str] | None:
        """(runtime, container name, process handle or "") of one of our handles."""
        text = str(handle)
        if not text.startswith(_PREFIX):
            return None
        runtime, _, rest = text[len(_PREFIX) :].partition(":")
        if runtime not in RUNTIMES or not rest:
            return None
        if runtime == "buildah":
            name, _, process = rest.partition("@")
            return (runtime, name, process) if parse_handle(process) else None
        return runtime, rest, ""

    def _start_buildah(self, argv: list[str], *, image: str, name: str, work_dir: Path) -> str:
        made = self._call([*self._base(), "from", "--pull=never", "--name", name, image])
        if made.returncode != 0:
            raise DriverError(f"buildah from {image} failed: {made.stderr.strip()[-1500:]}")
        try:
            with (work_dir / "container.log").open("ab") as out:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    close_fds=True,
                )
        except OSError as exc:
            self._call([*self._base(), "rm", name])
            raise DriverError(f"cannot start buildah run: {exc}", retryable=True) from exc
        track_child(proc)
        try:
            create_time = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            create_time = time.time()
        return f"{_PREFIX}buildah:{name}@{format_handle(proc.pid, create_time)}"
