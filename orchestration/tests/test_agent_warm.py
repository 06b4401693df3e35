"""A warm start gives the new case's initial fields a neighbour's cell values and keeps the
new case's own boundary conditions, for fields OpenFOAM wrote in ascii and in binary, and
OpenFOAM reads what it made; a field of another mesh or format keeps its initial values."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from orchestration.agent.resume import ResumeError, apply_resume
from orchestration.agent.warm import WarmError, internal_field_span, warm_fields
from orchestration.tests.conftest import CAVITY, OPENFOAM_ENV, copy_tutorial, needs_openfoam

ENV = {**os.environ, **OPENFOAM_ENV}


def _sh(case: Path, *argv: str) -> str:
    done = subprocess.run(argv, cwd=case, env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def _cavity(root: Path, *, lid: float, fmt: str, cells: int = 10) -> Path:
    case = copy_tutorial(CAVITY, root)
    block = (case / "system/blockMeshDict").read_text()
    (case / "system/blockMeshDict").write_text(block.replace("(20 20 1)", f"({cells} {cells} 1)"))
    control = (case / "system/controlDict").read_text()
    control = re.sub(r"(?m)^endTime\s+.*;", "endTime 0.02;", control)
    control = re.sub(r"(?m)^writeInterval\s+.*;", "writeInterval 4;", control)
    control = re.sub(r"(?m)^writeFormat\s+.*;", f"writeFormat {fmt};", control)
    (case / "system/controlDict").write_text(control)
    field = (case / "0/U").read_text().replace("uniform (1 0 0)", f"uniform ({lid} 0 0)")
    (case / "0/U").write_text(field)
    _sh(case, "blockMesh")
    return case


def _dir(path: Path) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY)


@needs_openfoam
@pytest.mark.solver
@pytest.mark.parametrize("fmt", ["ascii", "binary"])
def test_the_neighbours_cells_and_the_new_cases_boundaries(tmp_path: Path, fmt: str) -> None:
    neighbour = _cavity(tmp_path / "neighbour", lid=1, fmt=fmt)
    _sh(neighbour, "icoFoam")
    written = (neighbour / "0.02" / "U").read_bytes()
    new = _cavity(tmp_path / "new", lid=2, fmt=fmt)
    before = (new / "0" / "U").read_bytes()
    src, dst = _dir(neighbour), _dir(new)
    try:
        warmed, notes = warm_fields(source_fd=src, time="0.02", case_fd=dst, start="0")
    finally:
        os.close(src)
        os.close(dst)
    assert warmed == 2 and notes == []  # U and p (phi is the solver's to make)
    after = (new / "0" / "U").read_bytes()
    s0, s1, kind, count = internal_field_span(written)
    assert kind == b"vector" and count == 100
    a0, a1, _kind, _count = internal_field_span(after)
    if fmt == "ascii":
        assert after[a0:a1] == written[s0:s1]  # the neighbour's cell values
    else:  # the neighbour's doubles, as text in the new case's ascii file
        blob = written[s0:s1]
        start = blob.index(b"(") + 1
        values = struct.unpack("<300d", blob[start : start + 2400])
        text = after[a0:a1].decode().split("(", 1)[1]
        assert [float(v) for v in re.findall(r"[-+0-9.eE]+", text)] == list(values)
    b0, b1, _kind, _count = internal_field_span(before)
    assert after[:b0] == before[:b0] and after.endswith(before[b1:])  # the new case's rest
    assert b"uniform (2 0 0)" in after  # its own moving lid
    assert not (new / "0" / "phi").exists()
    # OpenFOAM reads it: the first step starts from the neighbour's flow, not from rest
    log = _sh(new, "icoFoam")
    first = re.search(r"Solving for Ux, Initial residual = ([0-9.e+-]+)", log)
    assert first is not None and float(first.group(1)) < 1, log[:3000]


def test_a_boundary_that_refers_to_the_initial_value_keeps_it(tmp_path: Path) -> None:
    header = "FoamFile\n{\n    format ascii;\n    class volScalarField;\n}\n"
    source = header + "internalField nonuniform List<scalar> 2 (1 2);\nboundaryField {}\n"
    target = (
        header + "p0 $internalField;\ninternalField uniform 7;\nboundaryField\n{\n"
        "    inlet { type freestreamPressure; freestreamValue $internalField; }\n"
        "    far { type fixedValue; value ${internalField}; }\n}\n"
    )
    for rel, text in (("a/9/p", source), ("b/0/p", target)):
        (tmp_path / rel).parent.mkdir(parents=True)
        (tmp_path / rel).write_text(text)
    src, dst = _dir(tmp_path / "a"), _dir(tmp_path / "b")
    try:
        assert warm_fields(source_fd=src, time="9", case_fd=dst, start="0") == (1, [])
    finally:
        os.close(src)
        os.close(dst)
    after = (tmp_path / "b/0/p").read_text()
    assert "internalField nonuniform List<scalar> 2 (1 2);" in after
    assert "freestreamValue uniform 7;" in after and "value uniform 7;" in after
    assert "p0 uniform 7;" in after and "$" not in after


def test_a_field_of_another_mesh_or_format_keeps_its_initial_values(tmp_path: Path) -> None:
    header = "FoamFile\n{{\n    format {fmt};\n    class volScalarField;\n    object p;\n}}\n"
    field = "{head}dimensions [0 2 -2 0 0 0 0];\ninternalField {values};\nboundaryField\n{{\n}}\n"
    listed = "nonuniform List<scalar> 3 (1 2 3)"
    source = field.format(head=header.format(fmt="ascii"), values=listed)
    for target in (
        field.format(head=header.format(fmt="ascii"), values="nonuniform List<scalar> 2 (0 0)"),
        field.format(head=header.format(fmt="binary"), values="uniform 0"),
    ):
        (tmp_path / "a" / "5").mkdir(parents=True, exist_ok=True)
        (tmp_path / "b" / "0").mkdir(parents=True, exist_ok=True)
        (tmp_path / "a" / "5" / "p").write_text(source)
        (tmp_path / "b" / "0" / "p").write_text(target)
        src, dst = _dir(tmp_path / "a"), _dir(tmp_path / "b")
        try:
            warmed, notes = warm_fields(source_fd=src, time="5", case_fd=dst, start="0")
        finally:
            os.close(src)
            os.close(dst)
        assert warmed == 0 and len(notes) == 1, notes
        assert (tmp_path / "b" / "0" / "p").read_text() == target
    with pytest.raises(WarmError, match="no internalField"):
        internal_field_span(b"FoamFile { format ascii; }\nboundaryField {}\n")


@needs_openfoam
@pytest.mark.solver
def test_a_warm_resume_names_the_neighbour_run_and_needs_its_write(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    neighbour = _cavity(runs / "run-a" / "attempt-1" / "case", lid=1, fmt="ascii")
    _sh(neighbour, "icoFoam")
    new = _cavity(runs / "run-b" / "attempt-1" / "case", lid=2, fmt="ascii")
    work = str(new.parent)
    resumed = apply_resume(
        resume={"source": "run-a", "attempt": 1, "time": "latest"}, work_dir=work, case=str(new)
    )
    assert resumed.attempt == 1 and resumed.time == "0.02" and resumed.steps_before == 0
    assert "warm start from time 0.02 of run run-a (2 fields)" in resumed.note
    control = (new / "system" / "controlDict").read_text()
    assert "startTime 0.02" not in control  # it starts at its own start time
    with pytest.raises(ResumeError, match="run run-c's files are not on this machine"):
        apply_resume(resume={"source": "run-c", "attempt": 1}, work_dir=work, case=str(new))
    shutil.rmtree(neighbour / "0.02")
    shutil.rmtree(neighbour / "0.01", ignore_errors=True)
    assert apply_resume(
        resume={"source": "run-a", "attempt": 1, "required": False}, work_dir=work, case=str(new)
    ) == ("", 0, "", 0, "")


@needs_openfoam
@pytest.mark.solver
def test_two_neighbours_blend_linearly_and_openfoam_reads_it(tmp_path: Path) -> None:
    """Between two neighbours (weight 0.5) each cell value is their mean; beyond them
    (weight −1) the line goes on, and a turbulence-like quantity stays positive."""
    runs = tmp_path / "runs"
    slow = _cavity(runs / "slow" / "attempt-1" / "case", lid=1, fmt="binary")
    fast = _cavity(runs / "fast" / "attempt-1" / "case", lid=3, fmt="ascii")
    _sh(slow, "icoFoam")
    _sh(fast, "icoFoam")
    new = _cavity(runs / "new" / "attempt-1" / "case", lid=2, fmt="ascii")
    resumed = apply_resume(
        resume={
            "source": "slow",
            "attempt": 1,
            "time": "0.02",
            "blend": {"source": "fast", "attempt": 1, "time": "0.02", "weight": 0.5},
        },
        work_dir=str(new.parent),
        case=str(new),
    )
    assert "blended with run fast (weight 0.5)" in resumed.note

    def values(path: Path) -> list[float]:
        data = path.read_bytes()
        s0, s1, _kind, _count = internal_field_span(data)
        text = data[s0:s1].decode()
        return [
            float(v) for v in re.findall(r"[-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?", text.split("(", 1)[1])
        ]

    a = values_of_binary(slow / "0.02" / "U")
    b = values(fast / "0.02" / "U")
    mixed = values(new / "0" / "U")
    assert mixed == pytest.approx([(x + y) / 2 for x, y in zip(a, b, strict=True)], abs=1e-15)
    assert b"uniform (2 0 0)" in (new / "0" / "U").read_bytes()
    log = _sh(new, "icoFoam")
    assert "End" in log


def values_of_binary(path: Path) -> list[float]:
    data = path.read_bytes()
    s0, s1, _kind, count = internal_field_span(data)
    blob = data[s0:s1]
    start = blob.index(b"(") + 1
    return list(struct.unpack(f"<{3 * count}d", blob[start : start + 24 * count]))


def test_a_blend_beyond_the_neighbours_keeps_turbulence_positive(tmp_path: Path) -> None:
    header = "FoamFile\n{{\n    format ascii;\n    class volScalarField;\n    object {name};\n}}\n"
    for name in ("k", "p"):
        for rel, values in (("a/5", "(1 4)"), ("b/5", "(3 1)")):
            path = tmp_path / rel / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                header.format(name=name)
                + f"internalField nonuniform List<scalar> 2 {values};\nboundaryField {{}}\n"
            )
        target = tmp_path / "c/0" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(header.format(name=name) + "internalField uniform 0;\nboundaryField {}\n")
    src, other, dst = _dir(tmp_path / "a"), _dir(tmp_path / "b"), _dir(tmp_path / "c")
    try:
        got = warm_fields(source_fd=src, time="5", case_fd=dst, start="0", blend=(other, "5", -1.0))
    finally:
        for fd in (src, other, dst):
            os.close(fd)
    assert got == (2, [])
    # a − (b − a): p goes on the line (−1, 7); k, below both there, is kept at the smaller (1)
    p = (tmp_path / "c/0/p").read_text()
    k = (tmp_path / "c/0/k").read_text()
    assert "List<scalar> \n2\n(\n-1\n7\n)" in p and "List<scalar> \n2\n(\n1\n7\n)" in k
