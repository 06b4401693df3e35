"""Case inspection: the series it predicts are the series real OpenFOAM output gives the agent."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from orchestration.case.caseinspect import inspect_case, series_known
from orchestration.case.foamdict import DictError, parse_text
from orchestration.results.dat import DatFollower
from orchestration.results.logparse import LogParser

FIXTURES = Path(__file__).parent / "fixtures"
TUTORIALS = Path("/usr/share/doc/openfoam-examples/examples")
ETC = "/usr/share/openfoam/etc"


def _tutorial(tmp_path: Path, rel: str) -> Path:
    src = TUTORIALS / rel
    if not src.is_dir():
        pytest.skip(f"OpenFOAM tutorial {rel} is not installed")
    dst = tmp_path / "case"
    shutil.copytree(src, dst)
    for path in list(dst.rglob("*.gz")):
        path.with_suffix("").write_bytes(gzip.decompress(path.read_bytes()))
        path.unlink()
    return dst


def test_predicted_series_are_exactly_what_the_agent_reads_from_real_output() -> None:
    # pitzDaily run 3 steps by OpenFOAM v1912 with forces, forceCoeffs, surfaceFieldValue,
    # volFieldValue, fieldMinMax, #includeFunc and function objects that write no series
    case = FIXTURES / "pitzdaily_fo"
    inspection = inspect_case(case, etc_dir=ETC)
    written = set(DatFollower(case).poll_columns())
    predicted = {s for s in inspection.series if not s.startswith("residual.")}
    assert predicted == written
    assert "inletP.areaAverage(p)" in predicted
    assert "patchAverage(name=outlet,p).areaAverage(p)" in predicted  # an #includeFunc
    assert "frc.total_x" in predicted and "fc.Cl(f)" in predicted


def test_predicted_residuals_are_the_ones_the_solver_log_gives() -> None:
    case = FIXTURES / "pitzdaily_fo"
    parser = LogParser()
    columns = parser.feed_block((case / "log.simpleFoam").read_text())
    columns.update(parser.flush_block())
    logged = {name for name in columns if name.startswith("residual.")}
    assert set(inspect_case(case, etc_dir=ETC).residuals) == logged


def test_the_solver_comes_from_controldict() -> None:
    assert inspect_case(FIXTURES / "pitzdaily_fo", etc_dir=ETC).solver == "simpleFoam"


def test_function_objects_that_write_no_series_say_why() -> None:
    inspection = inspect_case(FIXTURES / "pitzdaily_fo", etc_dir=ETC)
    by_name = {fo.name: fo for fo in inspection.function_objects}
    assert by_name["mm"].series == () and "location false" in by_name["mm"].note
    assert by_name["prb"].series == () and by_name["prb"].note
    assert by_name["si"].series == ()


@pytest.mark.parametrize(
    ("rel", "solver", "residuals", "mesh"),
    [
        (
            "incompressible/icoFoam/cavity/cavity",
            "icoFoam",
            ["residual.Ux", "residual.Uy", "residual.p"],
            ["blockMesh"],
        ),
        (
            "incompressible/simpleFoam/airFoil2D",
            "simpleFoam",
            ["residual.Ux", "residual.Uy", "residual.nuTilda", "residual.p"],
            [],
        ),
        (
            "incompressible/simpleFoam/motorBike",
            "simpleFoam",
            [
                "residual.Ux",
                "residual.Uy",
                "residual.Uz",
                "residual.k",
                "residual.omega",
                "residual.p",
            ],
            ["surfaceFeatureExtract", "blockMesh", "snappyHexMesh"],
        ),
        (
            "multiphase/interFoam/laminar/damBreak/damBreak",
            "interFoam",
            ["residual.Ux", "residual.Uy", "residual.alpha.water", "residual.p_rgh"],
            ["blockMesh", "setFields"],
        ),
    ],
)
def test_tutorial_cases(
    tmp_path: Path, rel: str, solver: str, residuals: list[str], mesh: list[str]
) -> None:
    inspection = inspect_case(_tutorial(tmp_path, rel), etc_dir=ETC)
    assert inspection.errors == ()
    assert inspection.solver == solver
    assert sorted(inspection.residuals) == sorted(residuals)
    assert inspection.mesh_steps[: len(mesh)] == tuple(mesh)


def test_motorbike_forcecoeffs_from_an_included_file(tmp_path: Path) -> None:
    # motorBike's controlDict has `#include "forceCoeffs"` inside its functions
    case = _tutorial(tmp_path, "incompressible/simpleFoam/motorBike")
    inspection = inspect_case(case, etc_dir=ETC)
    assert "forceCoeffs1.Cd" in inspection.series
    assert series_known(inspection.as_json(), "forceCoeffs1.Cl")
    assert not series_known(inspection.as_json(), "forceCoeffs.Cl")
    assert series_known(inspection.as_json(), "residual_final.omega")
    assert not series_known(inspection.as_json(), "residual.epsilon")  # kOmegaSST solves omega
    assert series_known(inspection.as_json(), "continuity.local")


def test_placeholders_are_typed_from_where_they_stand(tmp_path: Path) -> None:
    case = _tutorial(tmp_path, "incompressible/simpleFoam/pitzDaily")
    u = case / "0/U"
    u.write_text(u.read_text().replace("uniform (10 0 0)", "uniform ({{ Uin }} 0 0)", 1))
    (case / "0/U").write_text(
        (case / "0/U")
        .read_text()
        .replace("internalField   uniform (0 0 0)", "internalField   uniform {{ U0 }}")
    )
    control = case / "system/controlDict"
    control.write_text(
        control.read_text()
        .replace("endTime         2000;", "endTime         {{ iterations | int }};")
        .replace("writeFormat     ascii;", 'writeFormat     ascii;\ntitle "{{ label }}";')
    )
    block = case / "system/blockMeshDict"
    block.write_text(block.read_text().replace("(18 30 1)", "({{ nx }} 30 1)", 1))
    schemes = case / "system/fvSchemes"
    schemes.write_text(
        schemes.read_text()
        .replace("bounded Gauss linearUpwind grad(U);", "bounded Gauss {{ uscheme }};")
        .replace("div(phi,k)      bounded Gauss limitedLinear 1;", "div(phi,k) {{ kscheme }};")
        .replace(
            "div(phi,epsilon) bounded Gauss limitedLinear 1;",
            "div(phi,epsilon) bounded Gauss limitedLinear {{ psi }};",
        )
        .replace("default         steadyState;", "default         {{ ddt }};")
    )
    inspection = inspect_case(case, etc_dir=ETC)
    types = {p.name: (rel, p.type) for rel, items in inspection.placeholders.items() for p in items}
    assert types["Uin"] == ("0/U", "number")
    assert types["U0"] == ("0/U", "vector")
    assert types["iterations"] == ("system/controlDict", "integer")
    assert types["label"] == ("system/controlDict", "text")
    assert types["nx"] == ("system/blockMeshDict", "integer")
    # a scheme is a word wherever it stands in fvSchemes; a scheme's coefficient a number
    assert types["uscheme"] == ("system/fvSchemes", "text")
    assert types["kscheme"] == ("system/fvSchemes", "text")
    assert types["ddt"] == ("system/fvSchemes", "text")
    assert types["psi"] == ("system/fvSchemes", "number")
    assert inspection.solver == "simpleFoam"


def test_a_malformed_dictionary_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    case = _tutorial(tmp_path, "incompressible/icoFoam/cavity/cavity")
    control = case / "system/controlDict"
    control.write_text(control.read_text().replace("deltaT          0.005;", "deltaT { 0.005;"))
    inspection = inspect_case(case, etc_dir=ETC)
    assert inspection.errors
    assert inspection.errors[0].startswith("system/controlDict line")
    assert inspection.residuals  # the rest of the case is still read


def test_an_include_outside_the_case_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("application leaked;\n")
    case = tmp_path / "case"
    (case / "system").mkdir(parents=True)
    (case / "system/controlDict").write_text('#include "../../secret"\n')
    assert inspect_case(case, etc_dir=ETC).solver is None


def test_dictionary_syntax() -> None:
    text = """
    /* a comment { not a dict */
    a 1; // another
    b { c (1 2 (3 4)); "d|e" "quoted word"; }
    f $a;
    g $b.c;
    div(phi,U) Gauss linear;
    code #{ int x = 1; #};
    h {{ x * 2 }};
    """
    d = parse_text(text)
    assert d.word("a") == "1"
    assert d.get("b").get("c") == [["1", "2", ["3", "4"]]]
    assert d.get("b").word("d|e") == "quoted word"
    assert d.word("f") == "1"
    assert d.get("g") == [["1", "2", ["3", "4"]]]
    assert d.get("div(phi,U)") == ["Gauss", "linear"]
    assert d.word("h") == "{{ x * 2 }}"
    with pytest.raises(DictError, match="line 1"):
        parse_text("a { b 1;")
