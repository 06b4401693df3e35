"""Function-object output follower (fixture: real v1912 forceCoeffs of airFoil2D, with a restart)."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from orchestration.results.dat import DatFollower, split_columns
from orchestration.results.logparse import Point

AIRFOIL = Path(__file__).parent / "fixtures/airfoil_pp"


def _series(points: Iterable[Point]) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for name, x, y in points:
        out.setdefault(name, []).append((x, y))
    return out


def test_forcecoeffs_v1912_header_and_restart_folders_in_time_order() -> None:
    series = _series(DatFollower(AIRFOIL).poll())
    assert set(series) == {
        f"forceCoeffs.{c}"
        for c in "Cd Cs Cl CmRoll CmPitch CmYaw Cd(f) Cd(r) Cs(f) Cs(r) Cl(f) Cl(r)".split()
    }
    xs = [x for x, _ in series["forceCoeffs.Cl"]]
    assert xs == [float(i) for i in range(1, 36)]  # 0/ (1..30) then 30/ (31..35)
    assert series["forceCoeffs.Cl"][0] == (1.0, 6.034851)
    assert series["forceCoeffs.Cd"][-1][0] == 35.0


def test_incremental_reads_tolerate_partial_lines_and_new_files(tmp_path: Path) -> None:
    case = tmp_path / "case"
    shutil.copytree(AIRFOIL / "postProcessing/forceCoeffs/0", case / "postProcessing/forceCoeffs/0")
    source = (AIRFOIL / "postProcessing/forceCoeffs/30/coefficient.dat").read_bytes()
    follower = DatFollower(case)
    assert len(_series(follower.poll())["forceCoeffs.Cl"]) == 30
    assert follower.poll() == []
    restart = case / "postProcessing/forceCoeffs/30"
    restart.mkdir()
    header, _, rest = source.partition(b"\n31 ")
    partial = header + b"\n31 " + rest[:20]
    (restart / "coefficient.dat").write_bytes(partial)
    assert follower.poll() == []  # the first data line is not complete yet
    (restart / "coefficient.dat").write_bytes(source)
    series = _series(follower.poll())
    assert [x for x, _ in series["forceCoeffs.Cl"]] == [31.0, 32.0, 33.0, 34.0, 35.0]


def test_vectors_other_files_and_headerless_columns(tmp_path: Path) -> None:
    start = tmp_path / "postProcessing/forces/0"
    start.mkdir(parents=True)
    (start / "force.dat").write_text(
        "# Forces\n# Time total pressure\n0.5 (1 2 3) (4 5 6)\n1e+00\t(nan 0 -inf)\t(1 1 1)\n"
    )
    (start / "moment.dat").write_text("1 2 3\n")
    series = _series(DatFollower(tmp_path).poll())
    assert series["forces.total_x"] == [(0.5, 1.0), (1.0, series["forces.total_x"][1][1])]
    assert series["forces.pressure_z"] == [(0.5, 6.0), (1.0, 1.0)]
    assert series["forces.total_z"][1] == (1.0, float("-inf"))
    assert series["forces.moment.col1"] == [(1.0, 2.0)]
    assert series["forces.moment.col2"] == [(1.0, 3.0)]


def test_split_columns_keeps_parenthesised_groups() -> None:
    assert split_columns(" Time\tCd(f) \t(1 2 3)  x ") == ["Time", "Cd(f)", "(1 2 3)", "x"]


def test_no_postprocessing_dir_is_fine(tmp_path: Path) -> None:
    assert DatFollower(tmp_path).poll() == []
