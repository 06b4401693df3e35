"""The agent's post-processing on real cases: after a completed run it writes the flow-field
artifact (fields on a plane, the body's outline, Cp) and foamToVTK's files, inside the run's
sandbox, and uploads them in the result archive."""

from __future__ import annotations

import io
import json
import math
import tarfile
from pathlib import Path
from typing import Any

import pytest

from orchestration.agent.main import main
from orchestration.drivers.base import Step
from orchestration.results.fields import ARTIFACT
from orchestration.results.fields.artifact import build
from orchestration.tests.conftest import (
    FakePortal,
    make_cavity,
    make_spec,
    needs_openfoam,
    serial_steps,
)

pytestmark = [pytest.mark.solver, pytest.mark.slow, needs_openfoam]

AIRFOIL = Path(__file__).parents[2] / "templates/airfoil2d"


def _run(portal: FakePortal, spec_path: Path, spec: Any) -> dict[str, bytes]:
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    spec_path.write_text(spec.to_json(sandbox="bwrap"))
    assert main([str(spec_path)]) == 0
    assert portal.states()[-1] == "completed"
    (upload,) = portal.of("archive/")
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(upload.body), mode="r:gz") as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.startswith(("windtunnel/", "VTK/", "log.")):
                fh = tar.extractfile(member)
                assert fh is not None
                files[member.name] = fh.read()
        names = tar.getnames()
    assert names[0] == ARTIFACT, "the artifact leads the archive (the portal reads it first)"
    return files


def _grid_value(artifact: dict[str, Any], field: str, region: str, x: float, y: float) -> Any:
    grid = next(r for r in artifact["regions"] if r["name"] == region)
    i = round((x - grid["x0"]) / grid["dx"])
    j = round((y - grid["y0"]) / grid["dy"])
    return artifact["fields"][field]["values"][region][j * grid["nx"] + i]


def test_cavity_run_uploads_its_final_fields_on_the_2d_plane_and_vtk(
    portal: FakePortal, tmp_path: Path
) -> None:
    case = make_cavity(tmp_path / "template", end_time=0.05, cells=12)
    spec = make_spec(
        portal=portal,
        case_dir=case,
        work_dir=tmp_path / "run",
        steps=serial_steps(),
        fields=["k", "U"],  # the cavity has no k: noted, not fatal
    )
    files = _run(portal, tmp_path / "run/run.json", spec)
    artifact = json.loads(files[ARTIFACT])
    assert artifact["kind"] == "2d" and artifact["plane"]["normal"] == "z"
    assert artifact["time"] == "0.05"
    assert set(artifact["fields"]) == {"p", "mag(U)"}
    assert any("k:" in note for note in artifact["notes"])
    assert artifact["cp"] is None  # no forces function object
    (domain,) = artifact["regions"]
    assert domain["nx"] * domain["ny"] <= 20_000
    assert (domain["x0"], domain["y0"]) == (0.0, 0.0)
    assert math.isclose(domain["x0"] + domain["dx"] * (domain["nx"] - 1), 0.1, rel_tol=1e-3)
    speed = artifact["fields"]["mag(U)"]
    values = speed["values"]["domain"]
    assert len(values) == domain["nx"] * domain["ny"] and None not in values  # a full square
    # the lid drags the fluid: faster under the lid than at the bottom
    assert _grid_value(artifact, "mag(U)", "domain", 0.05, 0.099) > _grid_value(
        artifact, "mag(U)", "domain", 0.05, 0.001
    )
    assert 0 <= speed["min"] < speed["max"] <= 1.0
    # the walls' outline: the square's four sides
    xs = [x for x in artifact["outline"]["x"] if x is not None]
    assert min(xs) == 0.0 and max(xs) == 0.1
    assert any(name.startswith("VTK/") and name.endswith((".vtu", ".vtk")) for name in files)
    assert b"fields: wrote" in files["log.windtunnelFields"]
    assert any("== windtunnelFields:" in line for line in portal.log_lines())


def test_airfoil_run_gets_cp_along_the_force_patches_with_its_reference(
    portal: FakePortal, tmp_path: Path
) -> None:
    aoa, speed = 4.0, 26.0
    context = {
        "aoa": aoa,
        "speed": speed,
        "nu": 1e-5,
        "iterations": 15,
        "Ux": speed * math.cos(math.radians(aoa)),
        "Uy": speed * math.sin(math.radians(aoa)),
        "lift_x": -math.sin(math.radians(aoa)),
        "lift_y": math.cos(math.radians(aoa)),
        "drag_x": math.cos(math.radians(aoa)),
        "drag_y": math.sin(math.radians(aoa)),
        "chord": 35.05,
        "span": 0.05,
        "cofr_x": -17.55 + 0.25 * 35.05,
        "cofr_y": 0.23,
    }
    spec = make_spec(
        portal=portal,
        case_dir=AIRFOIL,
        work_dir=tmp_path / "run",
        steps=[Step(name="simpleFoam", argv=("simpleFoam",), role="solve")],
        context=context,
        fields=["nut"],
    )
    files = _run(portal, tmp_path / "run/run.json", spec)
    artifact = json.loads(files[ARTIFACT])
    assert artifact["kind"] == "2d"
    assert set(artifact["fields"]) == {"p", "mag(U)", "nut"}
    assert [r["name"] for r in artifact["regions"]] == ["domain", "body"]
    cp = artifact["cp"]
    assert cp["patches"] == ["walls"]
    ref = cp["reference"]
    assert ref["magUInf"] == speed and ref["kinematic_pressure"] is True and ref["pRef"] == 0
    assert ref["lRef"] == 35.05 and "26" in ref["text"]
    # the chord is the case's (the template's 35.05, forceCoeffs' lRef), not the extent of
    # the wall's face centres (33.39); x/c runs from the leading edge, face centres inside
    assert ref["chord"] == 35.05 and "c = 35.05, the lRef of forceCoeffs" in ref["text"]
    assert 0 < min(cp["x_over_c"]) < 0.01 and 0.9 < max(cp["x_over_c"]) < 1
    assert set(cp["side"]) == {"upper", "lower"}
    # the stagnation point at the leading edge: the highest Cp on the body (about 1 once
    # converged; these 15 iterations are not), suction on the upper side further back
    lead = [c for c, xc in zip(cp["cp"], cp["x_over_c"], strict=True) if xc < 0.02]
    assert max(lead) == max(cp["cp"]) and max(lead) > 0.5
    upper = [c for c, s in zip(cp["cp"], cp["side"], strict=True) if s == "upper"]
    assert min(upper) < 0
    # inside the airfoil there is no cell: the body region has holes, the outline the wall
    body_values = artifact["fields"]["p"]["values"]["body"]
    assert None in body_values and body_values.count(None) < len(body_values) // 4
    assert len(json.dumps(artifact)) < 2_000_000


def test_a_binary_case_is_refused_with_a_reason(tmp_path: Path) -> None:
    case = make_cavity(tmp_path / "case")
    (case / "0/p").write_text((case / "0/p").read_text().replace("ascii", "binary"))
    (case / "constant/polyMesh").mkdir(parents=True)
    points = "FoamFile { format binary; class vectorField; }\n1\n((0 0 0))\n"
    (case / "constant/polyMesh/points").write_text(points)
    with pytest.raises(Exception, match="binary: set writeFormat ascii"):
        build(str(case), [])
