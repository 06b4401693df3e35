"""The Python client and its `windtunnel` command (clients/python) against the real
stack: uvicorn, Celery, PostgreSQL, Redis, the run agent and real OpenFOAM on tiny cavity
cases. The command runs as a subprocess (`.venv/bin/windtunnel`, installed editable by
`uv sync`), configured as a user would be: WINDTUNNEL_URL and WINDTUNNEL_TOKEN, or a profile
stored by `windtunnel login`.

Also here: the client's records and endpoints checked against the OpenAPI schema the portal
publishes (frontend/src/generated/openapi.yaml), and its wheel built and installed into a
fresh environment (the `pip install ./clients/python` a user does)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import shutil
import stat
import subprocess
import tarfile
import types
import typing
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console
from windtunnel import ApiError, AuthError, Client, ExitCode, Study
from windtunnel.live import StudyStream
from windtunnel.models import ENDPOINTS, ENUMS, MODELS
from windtunnel.progress import BLOCKS

from core.testing import wait_for

ROOT = Path(__file__).resolve().parents[2]
WINDTUNNEL = ROOT / ".venv" / "bin" / "windtunnel"
SCHEMA = ROOT / "frontend" / "src" / "generated" / "openapi.yaml"

# a study of the cavity template: two runs of a 10 x 10 mesh, a few seconds each
CAVITY: dict[str, Any] = {
    "name": "lid sweep",
    "template": "cavity",
    "parameters": {"lid_velocity": {"values": [1, 2]}, "cells": 10, "end_time": 0.05},
}
# the same on an uploaded case (its placeholders get values from parameters and derived)
CASE_SPEC = """\
name: my cavity
solver: icoFoam
parameters:
  lid_velocity: {values: [0.5, 2.0]}
  cells: 10
  end_time: 0.05
  nu: 0.01
  courant: 0.5
derived:
  delta_t: "courant * (0.1 / cells) / lid_velocity"
  write_interval: end_time
objectives:
  u_min: {series: returnFlow.min(Ux), reduce: last}
"""


def cavity_folder(where: Path) -> Path:
    """The cavity template's case files, as a user's case folder."""
    folder = where / "mycavity"
    for sub in ("0", "constant", "system"):
        shutil.copytree(ROOT / "templates" / "cavity" / sub, folder / sub)
    return folder


def write_yaml(path: Path, spec: dict | str) -> Path:
    path.write_text(spec if isinstance(spec, str) else yaml.safe_dump(spec, sort_keys=False))
    return path


# --- the command line ----------------------------------------------------------------------


@pytest.mark.solver
@pytest.mark.slow
def test_a_case_folder_uploaded_and_a_yaml_sweep_watched_to_the_end_then_read_back(cli, tmp_path):
    """The issue's user path: upload your own case folder, submit a YAML sweep with --watch,
    then status, results as CSV and JSON, the log and the result archive."""
    folder = cavity_folder(tmp_path)
    up = cli("upload", str(folder))
    assert up.returncode == 0, up.stderr
    upload_id, name = up.stdout.split()[:2]
    assert name == "mycavity.tar.gz"
    assert "\n  0/U: lid_velocity\n" in up.stdout  # the placeholders it found, by file

    spec = write_yaml(tmp_path / "sweep.yaml", CASE_SPEC)
    sub = cli("submit", str(spec), "--case", upload_id, "--watch")
    assert sub.returncode == ExitCode.OK, (sub.stdout, sub.stderr)
    first = sub.stdout.splitlines()[0]
    study_id, url = first.split()
    assert url == f"{cli.env['WINDTUNNEL_URL']}/studies/{study_id}"
    # the live view's last frame: the bar by state, the slowest run's residuals as sparklines
    assert "2 completed" in sub.stdout and "2/2 done" in sub.stdout, sub.stdout
    assert "slowest run #" in sub.stdout and "residual.p" in sub.stdout, sub.stdout
    assert any(block in sub.stdout for block in BLOCKS), sub.stdout
    assert sub.stdout.rstrip().splitlines()[-1] == "completed: 2 completed"

    status = cli("status", study_id)
    assert status.returncode == 0, status.stderr
    assert "my cavity" in status.stdout and f"case {upload_id}" in status.stdout
    assert status.stdout.count("completed") >= 3  # the study and its two runs
    body = cli.json("status", study_id)
    assert body["state"] == "completed" and body["case"] == upload_id and body["url"] == url

    as_csv = cli("results", study_id, "--csv")
    assert as_csv.returncode == 0, as_csv.stderr
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert sorted(float(r["lid_velocity"]) for r in rows) == [0.5, 2.0]
    assert all(float(r["u_min"]) < 0 and r["state"] == "completed" for r in rows), rows
    results = cli.json("results", study_id)
    assert set(results["parameters"]) == {"lid_velocity", "cells", "end_time", "nu", "courant"}
    assert {r["run"] for r in results["rows"]} == {r["run"] for r in rows}
    table = cli("results", study_id)
    # a transient cavity runs to its end time: "iteration_limit" unless a rule said converged
    assert "u_min" in table.stdout
    assert "iteration_limit" in table.stdout or "converged" in table.stdout
    written = cli("results", study_id, "-o", "polar.csv")
    assert written.returncode == 0 and "wrote polar.csv" in written.stderr
    assert (tmp_path / "polar.csv").read_text() == as_csv.stdout

    run_id = results["rows"][0]["run"]
    log = cli("logs", run_id, "--lines", "400")
    assert log.returncode == 0 and "Time = " in log.stdout, log.stderr
    followed = cli("logs", run_id, "--follow")  # an ended run: its tail, then done
    assert followed.returncode == 0 and "End" in followed.stdout, followed.stderr
    assert cli.json("logs", run_id)["lines"][-1] == log.stdout.splitlines()[-1]

    got = cli("download", run_id)
    assert got.returncode == 0, got.stderr
    path = tmp_path / got.stdout.split()[1]
    with tarfile.open(path) as tar:
        assert any(n.endswith("log.icoFoam") for n in tar.getnames())
    (tmp_path / "archives").mkdir()
    saved = cli.json("download", run_id, "-o", "archives")
    assert saved["path"] == f"archives/{path.name}" and saved["bytes"] == path.stat().st_size


@pytest.mark.solver
@pytest.mark.slow
def test_exit_codes_tell_a_script_how_a_study_ended(cli, tmp_path):
    """1 when the study ends with failed runs (here every run diverges at once) or was
    cancelled; 4, with the API's message, when there is nothing left to cancel."""
    diverging = {
        **CAVITY,
        "name": "diverges",
        "convergence": {"diverge": {"residual_above": 1.0e-12}},
    }
    sub = cli("submit", str(write_yaml(tmp_path / "bad.yaml", diverging)), "--watch", "--json")
    assert sub.returncode == ExitCode.FAILED, (sub.stdout, sub.stderr)
    study = json.loads(sub.stdout)
    assert study["state"] == "completed_with_failures"
    assert {k: n for k, n in study["progress"]["by_state"].items() if n} == {"failed": 2}
    assert cli("status", study["id"]).returncode == ExitCode.FAILED
    assert cli("watch", study["id"]).returncode == ExitCode.FAILED

    long = {**CAVITY, "name": "long", "parameters": {"cells": 20, "end_time": 50}}
    sub = cli("submit", str(write_yaml(tmp_path / "long.yaml", long)))
    assert sub.returncode == 0, sub.stderr
    study_id = sub.stdout.split()[0]
    client = Client(cli.env["WINDTUNNEL_URL"], cli.env["WINDTUNNEL_TOKEN"])
    run = client.study(study_id).runs()[0]
    wait_for(lambda: run.refresh().state == "running", timeout=120, what="the run to start")
    wait_for(run.series_names, timeout=120, what="the run's first telemetry")
    # its first time steps are in its stored log (lines are stored apart from the points)
    wait_for(
        lambda: any("Time = " in line for line in run.log(lines=50)),
        timeout=120,
        what="the run's first time steps in its log",
    )
    assert cli("status", study_id).returncode == 0  # running: nothing ended badly yet
    follow = subprocess.Popen(
        [str(WINDTUNNEL), "logs", run.id, "--follow"],
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert follow.stdout is not None
    first = follow.stdout.readline()  # the tail is printed at once; then it follows
    cancelled = cli.json("cancel", study_id)
    assert cancelled["state"] == "cancelled", cancelled
    # read on through the same file: readline() may have buffered the whole tail already,
    # and communicate() would read past that buffer (it reads the pipe itself)
    out = follow.stdout.read()  # to its end: the follow ends with the run
    assert follow.stderr is not None
    err = follow.stderr.read()
    follow.wait(timeout=600)
    assert follow.returncode == ExitCode.FAILED, (out, err)
    assert "Time = " in first + out
    assert err.startswith(f"run {run.id} cancelled"), err
    assert cli("status", study_id).returncode == ExitCode.FAILED
    again = cli("cancel", study_id)
    assert again.returncode == ExitCode.API
    assert again.stderr == ("windtunnel: error: the study is cancelled already\n")


def test_a_bad_spec_is_refused_with_the_apis_message_and_exit_code(cli, live, tmp_path):
    too_steep = {"name": "too steep", "template": "airfoil2d", "parameters": {"aoa": 45}}
    done = cli("submit", str(write_yaml(tmp_path / "steep.yaml", too_steep)))
    assert done.returncode == ExitCode.API
    assert done.stdout == ""
    assert (
        done.stderr == "windtunnel: error: parameters.aoa: aoa = 45 is above its maximum 20 deg\n"
    )
    as_json = cli("submit", str(tmp_path / "steep.yaml"), "--json")
    assert as_json.returncode == ExitCode.API
    error = json.loads(as_json.stderr)["error"]
    assert error["code"] == "invalid" and error["field"] == "parameters.aoa"
    assert error["status"] == 400

    fixed = write_yaml(tmp_path / "fixed.yaml", {**too_steep, "parameters": {"aoa": [0, 4, 8]}})
    preview = cli("preview", str(fixed))
    assert preview.returncode == 0, preview.stderr
    assert preview.stdout.startswith("3 runs of simpleFoam on local"), preview.stdout
    # what it will cost, from the tenant's earlier runs of the case (or that there are none)
    assert "\nestimated cost: " in preview.stdout, preview.stdout
    previewed = cli.json("preview", str(fixed))
    assert previewed["rows"][2]["parameters"]["aoa"] == 8
    assert previewed["estimate"]["runs"] == 3, previewed["estimate"]

    broken = write_yaml(tmp_path / "broken.yaml", "name: x\nparameters: {aoa: [1, 2}\n")
    done = cli("submit", str(broken))
    assert done.returncode == ExitCode.USAGE
    assert "broken.yaml is not valid YAML: line 2, column" in done.stderr
    done = cli("submit", str(tmp_path / "missing.yaml"))
    assert done.returncode == ExitCode.USAGE and "missing.yaml: no such file" in done.stderr
    done = cli("submit", str(write_yaml(tmp_path / "list.yaml", "- a\n- b\n")))
    assert done.returncode == ExitCode.USAGE and "a study spec is a mapping" in done.stderr
    assert cli("submit").returncode == ExitCode.USAGE  # no SPEC
    assert cli("status", "--no-such-option").returncode == ExitCode.USAGE
    nothing = cli("status", "0b9a6f1e-0000-4000-8000-000000000000")
    assert nothing.returncode == ExitCode.API and "No study" in nothing.stderr, nothing.stderr
    assert live.get("/api/v1/studies/").json()["count"] == 0  # none of these made a study


def test_templates_are_listed_and_one_templates_parameters_shown(cli):
    listed = cli("templates")
    assert listed.returncode == 0, listed.stderr
    assert "airfoil2d" in listed.stdout and "cavity" in listed.stdout
    names = {t["name"] for t in cli.json("templates")}
    assert {"airfoil2d", "cavity"} <= names
    one = cli("templates", "airfoil2d")
    assert "aoa" in one.stdout and "angle of attack" in one.stdout and "Cl" in one.stdout
    assert cli.json("templates", "airfoil2d")["parameters"]["aoa"]["max"] == 20
    missing = cli("templates", "nope")
    assert missing.returncode == ExitCode.API and "No template named 'nope'" in missing.stderr


def test_login_stores_a_named_token_only_its_owner_can_read(cli, live, tmp_path):
    user = live.tenant.user.username
    password = f"pw-{live.tenant.name}"
    config = Path(cli.env["WINDTUNNEL_CONFIG"])
    signed_in = cli(
        "login",
        live.stack.url + "/api/v1/",  # pasted with the API's path: the portal is the same
        "--name",
        "test",
        "--username",
        user,
        "--password-stdin",
        input=password + "\n",
    )
    assert signed_in.returncode == 0, signed_in.stderr
    assert f"as {user} (tenant {live.tenant.name})" in signed_in.stdout
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    stored = config.read_text()
    assert f'url = "{live.stack.url}"' in stored and 'token = "wt_' in stored
    assert password not in stored

    # only the stored profile now: no URL or token in the environment
    bare = {"WINDTUNNEL_URL": "", "WINDTUNNEL_TOKEN": ""}
    assert cli("templates", **bare).returncode == 0
    assert cli("--profile", "test", "templates", **bare).returncode == 0
    other = cli("--profile", "other", "templates", **bare)
    assert other.returncode == ExitCode.AUTH and "no profile named 'other'" in other.stderr
    assert cli("logout", "test").returncode == 0
    none = cli("templates", **bare)
    assert none.returncode == ExitCode.AUTH
    assert "no portal configured: set WINDTUNNEL_URL and WINDTUNNEL_TOKEN" in none.stderr

    wrong = cli("login", live.stack.url, "-u", user, "--password-stdin", input="nope\n")
    assert wrong.returncode == ExitCode.AUTH and "wrong username or password" in wrong.stderr
    revoked = cli("templates", WINDTUNNEL_TOKEN="wt_not-a-token")
    assert revoked.returncode == ExitCode.AUTH
    assert "Invalid or revoked API token" in revoked.stderr and "windtunnel login" in revoked.stderr
    gone = cli("templates", WINDTUNNEL_URL="http://127.0.0.1:9")  # nothing listens there
    assert gone.returncode == ExitCode.UNAVAILABLE and "cannot reach the portal" in gone.stderr


def test_tokens_are_made_listed_and_revoked_from_the_command_line(cli, live):
    made = cli("tokens", "create", "ci", "--expires-in-days", "30")
    assert made.returncode == 0, made.stderr
    key = made.stdout.splitlines()[0]
    assert key.startswith("wt_") and "not shown again" in made.stderr
    assert cli("templates", WINDTUNNEL_TOKEN=key).returncode == 0

    listed = {t["name"]: t for t in cli.json("tokens")}
    assert set(listed) == {"default", "ci"}  # the fixture's token, and this one
    assert listed["ci"]["expires_at"] and key not in json.dumps(listed)
    table = cli("tokens").stdout
    assert "ci" in table and key[:10] in table and "never" in table

    taken = cli("tokens", "create", "ci")
    assert taken.returncode == ExitCode.API and "a token named 'ci' already" in taken.stderr
    assert cli("tokens", "revoke", "ci").returncode == 0
    refused = cli("templates", WINDTUNNEL_TOKEN=key)
    assert refused.returncode == ExitCode.AUTH and "Invalid or revoked API token" in refused.stderr
    missing = cli("tokens", "revoke", "ci")
    assert missing.returncode == ExitCode.API and "no API token named 'ci'" in missing.stderr
    # by id too
    other = cli.json("tokens", "create", "other")
    assert cli("tokens", "revoke", str(other["id"])).returncode == 0
    assert [t["name"] for t in cli.json("tokens")] == ["default"]


# --- the Python API ------------------------------------------------------------------------


@pytest.mark.solver
@pytest.mark.slow
def test_python_submit_wait_results_series_and_pandas(live, tmp_path, monkeypatch):
    monkeypatch.setenv("WINDTUNNEL_URL", live.stack.url)
    monkeypatch.setenv("WINDTUNNEL_TOKEN", live.token)
    client = Client.from_env()
    assert {t.name for t in client.templates()} >= {"airfoil2d", "cavity"}
    spec = write_yaml(tmp_path / "cavity.yaml", CAVITY)
    study = client.submit(spec)  # a YAML file, or a dict
    assert isinstance(study, Study) and study.state in ("submitted", "running")
    shown = io.StringIO()
    assert study.wait(progress=True, console=Console(file=shown, width=120)) is study
    assert study.ok and study.state == "completed", study.record
    assert "2/2 done" in shown.getvalue() and "residual." in shown.getvalue()

    rows = study.results()
    assert sorted(r.parameters["lid_velocity"] for r in rows) == [1, 2]
    assert all(r.state == "completed" and r.objectives["u_min"] < 0 for r in rows)
    frame = study.to_pandas()
    # a column per parameter of the spec, then per objective, then the run's outcome
    assert set(frame.columns[:3]) == {"lid_velocity", "cells", "end_time"}
    assert set(frame.columns[3:6]) == {"u_min", "v_min", "mean_speed"}
    assert len(frame) == 2 and (frame["u_min"] < 0).all() and set(frame["state"]) == {"completed"}
    assert frame.loc[rows[0].index, "run"] == rows[0].run

    run = study.runs()[0]
    assert "residual.p" in run.series_names()
    x, y = run.series("residual.p")
    assert len(x) == len(y) >= 10 and list(x) == sorted(x)  # a point per time step
    assert type(x).__module__ == "numpy"  # numpy is installed here (the pandas extra)
    few = run.series("residual.p", max_points=8)
    assert len(few.x) <= 8
    with pytest.raises(ApiError, match="has no series named 'residual.q'; it has: .*residual.p"):
        run.series("residual.q")
    with pytest.raises(AuthError, match="Invalid or revoked API token"):
        Client(live.stack.url, "wt_nope").templates()


@pytest.mark.solver
@pytest.mark.slow
@pytest.mark.parametrize("live_stream", [True, False], ids=["websocket", "polling"])
def test_watch_yields_a_snapshot_then_changes_in_order_until_the_end(live, live_stream):
    client = Client(live.stack.url, live.token)
    # runs of a few seconds: the stream is open long before they end
    spec = {**CAVITY, "name": f"watched {live_stream}"}
    study = client.submit({**spec, "parameters": {**CAVITY["parameters"], "end_time": 10}})
    with StudyStream(client, study.id, live=live_stream) as stream:
        assert stream.mode == ("websocket" if live_stream else "polling")
    events = list(study.watch(live=live_stream, poll=0.5))
    assert events[0].type == "snapshot" and events[0].study is not None
    assert [e.seq for e in events] == sorted({e.seq for e in events})  # no repeats, in order
    assert events[-1].finished and study.state == "completed"
    if live_stream:  # the runs' transitions came from the websocket, with the runs in them
        assert any(e.type == "runs" and e.runs for e in events), events
    assert sum(events[-1].by_state.values()) == 2


# --- the client cannot drift from the API --------------------------------------------------


def _schema():
    return yaml.safe_load(SCHEMA.read_text())


def _json_types(schema: dict, node: dict) -> set[str] | None:
    """The JSON types a schema node allows (None: any), following $ref, allOf, oneOf."""
    if "$ref" in node:
        return _json_types(schema, schema["components"]["schemas"][node["$ref"].split("/")[-1]])
    if "allOf" in node:
        found = [_json_types(schema, n) for n in node["allOf"]]
        known = [t for t in found if t is not None]
        return set.intersection(*known) if known else None
    if "oneOf" in node or "anyOf" in node:
        options = [_json_types(schema, n) for n in node.get("oneOf") or node["anyOf"]]
        union: set[str] = set()
        for kinds in options:
            if kinds is None:
                return None
            union |= kinds
        return union
    if "type" in node:
        named = node["type"] if isinstance(node["type"], list) else [node["type"]]
        return set(named) | ({"null"} if node.get("nullable") else set())
    if "enum" in node:
        return {"null" if v is None else "string" for v in node["enum"]}
    return None  # {}: anything


PYTHON_TO_JSON = {
    str: {"string"},
    int: {"integer"},
    float: {"number", "integer"},
    bool: {"boolean"},
    dict: {"object"},
    list: {"array"},
    types.NoneType: {"null"},
}


def _python_types(tp) -> tuple[set[str], str | None]:
    """The JSON types a field's annotation takes, and the component of a nested record."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        out: set[str] = set()
        component = None
        for arg in typing.get_args(tp):
            kinds, nested = _python_types(arg)
            out |= kinds
            component = component or nested
        return out, component
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return {"object"}, getattr(tp, "SCHEMA")  # noqa: B009 — every record names one
    if tp is typing.Any:
        return set(), None
    return PYTHON_TO_JSON[origin or tp], None


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_every_field_the_client_reads_is_in_the_api_schema_with_a_compatible_type(model):
    schema = _schema()
    component = schema["components"]["schemas"][model.SCHEMA]
    properties, required = component["properties"], set(component.get("required", []))
    hints = typing.get_type_hints(model)
    problems = []
    for field in dataclasses.fields(model):
        if field.name == "raw":  # the answer as it came
            continue
        if field.name not in properties:
            problems.append(f"{field.name}: not in the schema's {model.SCHEMA}")
            continue
        allowed = _json_types(schema, properties[field.name])
        wants, nested = _python_types(hints[field.name])
        has_default = not (
            field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        )
        if field.name not in required and not has_default:
            problems.append(f"{field.name}: the schema may leave it out; give it a default")
        if allowed is not None:
            if "null" in allowed and "null" not in wants:
                problems.append(f"{field.name}: may be null in the schema; make it optional")
            if wants and not (allowed - {"null"}) <= wants | (
                {"integer"} if "number" in wants else set()
            ):
                problems.append(
                    f"{field.name}: the schema says {sorted(allowed)}, the client {sorted(wants)}"
                )
        if nested is not None:
            ref = json.dumps(properties[field.name])
            assert f"#/components/schemas/{nested}" in ref, (field.name, ref)
    assert not problems, problems


def test_every_endpoint_and_state_the_client_uses_is_in_the_api_schema():
    schema = _schema()
    for method, path in ENDPOINTS:
        assert method in schema["paths"].get(path, {}), (
            f"{method.upper()} {path} is not in the schema"
        )
    for name, values in ENUMS.items():
        assert values <= set(schema["components"]["schemas"][name]["enum"]), name


# --- the package as a user installs it -----------------------------------------------------


def _uv() -> str:
    found = shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")
    assert Path(found).is_file(), "uv is installed by scripts/bootstrap"
    return found


@pytest.mark.slow
def test_the_client_builds_as_a_wheel_that_installs_its_typed_package_and_command(tmp_path):
    uv = _uv()
    built = subprocess.run(
        [
            uv,
            "build",
            "--wheel",
            "--out-dir",
            str(tmp_path / "dist"),
            str(ROOT / "clients" / "python"),
        ],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("windtunnel_client-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        assert "windtunnel = windtunnel.cli:main" in zf.read(entry_points).decode()
    assert "windtunnel/py.typed" in names and "windtunnel/cli.py" in names

    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "--quiet", "--python", "3.11", str(venv)], check=True)
    installed = subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr
    version = subprocess.run(
        [str(venv / "bin" / "windtunnel"), "--version"], capture_output=True, text=True
    )
    assert version.returncode == 0 and "windtunnel, version 0.1.0" in version.stdout
    # without the extras: no pandas, no websockets; to_pandas says what to install
    bare = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import windtunnel, windtunnel.live as l; print(l.connect is None)",
        ],
        capture_output=True,
        text=True,
    )
    assert bare.stdout.strip() == "True", bare.stderr
