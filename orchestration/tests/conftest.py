"""Fixtures for orchestration tests: a fake portal, real OpenFOAM cases. No Django needed."""

from __future__ import annotations

import array
import base64
import dataclasses
import gzip
import json
import os
import re
import shutil
import sys
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from orchestration.drivers.base import RunPhase, RunSpec, Step
from orchestration.drivers.local import LocalDriver

FIXTURES = Path(__file__).parent / "fixtures"
TUTORIALS = Path("/usr/share/doc/openfoam-examples/examples")
CAVITY = TUTORIALS / "incompressible/icoFoam/cavity/cavity"
OPENFOAM_ENV = {"WM_PROJECT_DIR": "/usr/share/openfoam"}
TOKEN = "test-token"
# the run id of make_spec's runs: one per test process, so that runs of tests on parallel
# workers have sandbox uids and cgroups of their own (the agent kills whatever its run's uid
# left running when the run ends)
RUN_ID = str(uuid.uuid4())
# the portal's own schema of what an agent sends (the fake portal holds agents to it)
AGENT_MESSAGES = json.loads(
    (Path(__file__).parents[2] / "backend/ingest/schemas/agent-messages.json").read_text()
)
MESSAGE_OF_ENDPOINT = {
    "state/": "StateReport",
    "heartbeat/": "Heartbeat",
    "telemetry/": "TelemetryBatch",
}

needs_openfoam = pytest.mark.skipif(
    not (CAVITY.is_dir() and shutil.which("icoFoam") and shutil.which("blockMesh")),
    reason="OpenFOAM (Debian openfoam + openfoam-examples) is not installed",
)


# -- the fake portal -----------------------------------------------------------------------


@dataclasses.dataclass
class Call:
    method: str
    endpoint: str  # "state/", "heartbeat/", "telemetry/", "archive/"
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any  # parsed JSON, or bytes for the archive
    at: float
    peer: tuple[str, int] = ("", 0)  # the client's address: one per TCP connection


Responder = Callable[[Call], "tuple[int, dict[str, Any]] | None"]


def unpack(series: dict[str, Any]) -> dict[str, dict[str, list[Any]]]:
    """A batch's series with packed columns (base64 of little-endian float64s) as lists."""

    def column(value: Any) -> list[Any]:
        if isinstance(value, list):
            return value
        values = array.array("d")
        values.frombytes(base64.b64decode(value, validate=True))
        if sys.byteorder != "little":
            values.byteswap()
        return values.tolist()

    return {name: {"x": column(c["x"]), "y": column(c["y"])} for name, c in series.items()}


class FakePortal:
    """The ingest API on a loopback port: records every call; `responder` may override."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.invalid: list[str] = []  # messages the real portal would refuse (400)
        self.lock = threading.Lock()
        self.responder: Responder | None = None
        portal = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn does

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                portal._handle(self)

            def do_PUT(self) -> None:
                portal._handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        parsed = urllib.parse.urlsplit(request.path)
        match = re.fullmatch(r"/api/v1/ingest/runs/[^/]+/(\w+/)", parsed.path)
        raw = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        body: Any = raw
        if request.headers.get("Content-Type") == "application/json":
            body = json.loads(raw)
        call = Call(
            method=request.command,
            endpoint=match.group(1) if match else parsed.path,
            query=urllib.parse.parse_qs(parsed.query),
            headers=dict(request.headers),
            body=body,
            at=time.monotonic(),
            peer=request.client_address,
        )
        with self.lock:
            self.calls.append(call)
        answer: dict[str, Any]
        problem = self._schema_problem(call)
        if request.headers.get("Authorization") != f"Bearer {TOKEN}" or not match:
            status, answer = 401, {"code": "unauthorized"}
        elif problem:
            with self.lock:
                self.invalid.append(f"{call.endpoint}: {problem}")
            status, answer = 400, {"code": "invalid", "detail": problem}
        else:
            override = self.responder(call) if self.responder else None
            status, answer = override or (200, {} if call.method == "PUT" else {"stop": False})
        data = json.dumps(answer).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    @staticmethod
    def _schema_problem(call: Call) -> str | None:
        """Why the real portal would refuse this message (agent-messages.json), or None."""
        name = MESSAGE_OF_ENDPOINT.get(call.endpoint)
        if name is None or call.method != "POST":
            return None
        schema = {"$ref": f"#/$defs/{name}", "$defs": AGENT_MESSAGES["$defs"]}
        error = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(schema).iter_errors(call.body)
        )
        return None if error is None else f"{error.json_path}: {error.message}"

    # -- queries --------------------------------------------------------------------------

    def of(self, endpoint: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.endpoint == endpoint]

    def states(self) -> list[str]:
        return [c.body["state"] for c in self.of("state/")]

    def series(self) -> dict[str, list[list[Any]]]:
        """Every point received, by series, as [x, y] (the agent sends columns, packed),
        from telemetry batches and the final report's last batch."""
        merged: dict[str, list[list[Any]]] = {}
        for call in self.calls:
            if call.endpoint not in ("telemetry/", "state/") or not isinstance(call.body, dict):
                continue
            for name, columns in unpack(call.body.get("series", {})).items():
                points = [list(p) for p in zip(columns["x"], columns["y"], strict=True)]
                merged.setdefault(name, []).extend(points)
        return merged

    def log_lines(self) -> list[str]:
        return [line for call in self.of("telemetry/") for line in call.body["log"]]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 180.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.05)
        return predicate()


@pytest.fixture
def portal() -> Iterator[FakePortal]:
    fake = FakePortal()
    fake.thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()
    assert not fake.invalid, f"the agent sent messages the portal refuses: {fake.invalid}"


# -- cases ---------------------------------------------------------------------------------


def copy_tutorial(src: Path, dst: Path) -> Path:
    """Copy an OpenFOAM tutorial, decompressing the Debian package's .gz files."""
    for path in sorted(src.rglob("*")):
        target = dst / path.relative_to(src)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path.suffix == ".gz":
            target.parent.mkdir(parents=True, exist_ok=True)
            target.with_suffix("").write_bytes(gzip.decompress(path.read_bytes()))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    return dst


def _sub(path: Path, pattern: str, replacement: str) -> None:
    text = path.read_text()
    new = re.sub(pattern, replacement, text, flags=re.MULTILINE)
    assert re.search(pattern, text, flags=re.MULTILINE), f"{pattern!r} not found in {path}"
    path.write_text(new)


def make_cavity(
    dst: Path, *, end_time: float = 0.025, write_interval: int = 5, cells: int = 10
) -> Path:
    """A small cavity template: lid speed and viscosity are placeholders."""
    case = copy_tutorial(CAVITY, dst)
    _sub(case / "system/blockMeshDict", r"\(20 20 1\)", f"({cells} {cells} 1)")
    _sub(case / "system/controlDict", r"^endTime\s+.*;", f"endTime         {end_time};")
    _sub(
        case / "system/controlDict",
        r"^writeInterval\s+.*;",
        f"writeInterval   {write_interval};",
    )
    _sub(case / "constant/transportProperties", r"0\.01;", "{{ nu }};")
    _sub(case / "0/U", r"uniform \(1 0 0\)", "uniform ({{ lid }} 0 0)")
    return case


@pytest.fixture
def cavity(tmp_path: Path) -> Path:
    return make_cavity(tmp_path / "template")


def serial_steps() -> list[Step]:
    return [
        Step(name="blockMesh", argv=("blockMesh",), role="prepare"),
        Step(name="icoFoam", argv=("icoFoam",), role="solve"),
    ]


def parallel_steps(n: int = 2) -> list[Step]:
    return [
        Step(name="blockMesh", argv=("blockMesh",), role="prepare"),
        Step(name="decomposePar", argv=("decomposePar", "-force"), role="decompose"),
        Step(
            name="icoFoam",
            argv=("mpirun", "--oversubscribe", "-np", str(n), "icoFoam", "-parallel"),
            role="solve",
        ),
        Step(name="reconstructPar", argv=("reconstructPar", "-latestTime"), role="reconstruct"),
    ]


def make_spec(
    *,
    portal: FakePortal,
    case_dir: Path,
    work_dir: Path,
    steps: list[Step],
    attempt: int = 1,
    **extra: Any,
) -> RunSpec:
    fields: dict[str, Any] = {
        "run_id": RUN_ID,
        "attempt": attempt,
        "portal_url": portal.url,
        "token": TOKEN,
        "case_dir": str(case_dir),
        "work_dir": str(work_dir),
        "context": {"nu": 0.01, "lid": 1.0},
        "steps": steps,
        "env": dict(OPENFOAM_ENV),
        "heartbeat_interval": 0.3,
        "telemetry_interval": 0.2,
        **extra,
    }
    return RunSpec(**fields)


def run_locally(portal: FakePortal, spec: RunSpec) -> dict[str, Any]:
    """Run `spec` through the local driver (no fork server) and its agent; the final report
    the agent sent."""
    driver = LocalDriver(fork_server=False)
    driver.prepare(spec)
    handle = driver.start(spec)
    assert wait_until(lambda: driver.poll(handle).phase == RunPhase.EXITED), "agent still running"
    body: dict[str, Any] = portal.of("state/")[-1].body
    return body


class Clock:
    """A monotonic clock a test moves by hand (`clock.now += 1.0`)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def wait_until(predicate: Callable[[], bool], timeout: float = 180.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture(autouse=True)
def _no_inherited_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent must reach the loopback portal directly."""
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


# -- the loopback OpenStack control plane (scripts/start-openstack) ------------------------

# WT_OPENSTACK_DIR: another control plane's directory (a start-openstack run from another
# checkout), for a session whose shared one is busy or broken
OPENSTACK_CLOUD_JSON = (
    Path(
        os.environ.get("WT_OPENSTACK_DIR")
        or Path(__file__).resolve().parents[2] / ".data/openstack"
    )
    / "cloud.json"
)


@dataclasses.dataclass(frozen=True)
class OpenStackCloud:
    """cloud.json as written by scripts/start-openstack, and connections to that cloud."""

    facts: dict[str, Any]

    def connect(self, role: str = "tenant", **auth: str) -> Any:
        """An openstack.connection.Connection as the admin or the tenant's member user;
        `auth` overrides fields (username, password, project_name, ...), e.g. for a scratch
        project of a test's own."""
        import openstack

        if role not in ("admin", "tenant"):
            raise ValueError(f"role must be admin or tenant, not {role!r}")
        auth = {k: v for k, v in self.facts[role].items() if k != "project_id"} | auth
        return openstack.connect(
            load_yaml_config=False,
            load_envvars=False,
            auth=auth,
            region_name=self.facts["region"],
            interface="public",
            identity_api_version="3",
        )


@pytest.fixture(scope="session")
def openstack_cloud() -> OpenStackCloud:
    if not OPENSTACK_CLOUD_JSON.exists():
        pytest.skip(
            f"no OpenStack control plane: {OPENSTACK_CLOUD_JSON} is missing "
            "(scripts/start-openstack makes it; make test runs it unless WT_NO_OPENSTACK=1)"
        )
    pytest.importorskip("openstack", reason="openstacksdk is not installed")
    import urllib.request

    facts = json.loads(OPENSTACK_CLOUD_JSON.read_text())
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, no proxy
    try:
        with direct.open(facts["auth_url"], timeout=10):
            pass
    except OSError as error:
        pytest.skip(f"the OpenStack control plane does not answer at {facts['auth_url']}: {error}")
    return OpenStackCloud(facts)
