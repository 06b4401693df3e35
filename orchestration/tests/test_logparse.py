"""The log parser on real OpenFOAM v1912 logs (fixtures produced by running the tutorials)."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import pytest

from orchestration.logparse import LogParser

LOGS = Path(__file__).parent / "fixtures/logs"


def _parse(name: str) -> tuple[LogParser, dict[str, list[tuple[float, float]]]]:
    parser = LogParser()
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    with (LOGS / name).open() as fh:
        lines = fh.readlines()
    for line in lines:
        for name_, x, y in parser.feed(line):
            series[name_].append((x, y))
    for name_, x, y in parser.flush():
        series[name_].append((x, y))
    return parser, series


@pytest.mark.parametrize("log", ["icoFoam.serial.log", "icoFoam.parallel.log"])
def test_icofoam_residuals_courant_continuity_and_times(log: str) -> None:
    parser, series = _parse(log)
    assert parser.ended and not parser.converged and parser.fatal_error is None
    assert parser.iterations == 10 and parser.last_time == pytest.approx(0.05)
    xs = [x for x, _ in series["residual.p"]]
    assert xs == pytest.approx([0.005 * i for i in range(1, 11)])
    for name in (
        "residual.Ux",
        "residual.Uy",
        "residual_final.p",
        "courant.mean",
        "courant.max",
        "continuity.local",
        "continuity.global",
        "continuity.cumulative",
        "execution.time",
        "execution.clock",
    ):
        assert len(series[name]) == 10, name


def test_first_initial_and_last_final_residual_of_a_step() -> None:
    _, series = _parse("icoFoam.serial.log")
    # Time = 0.005: p solved twice (1 → 0.0463335, then 0.380755 → 1.75264e-07)
    assert series["residual.p"][0] == (0.005, 1.0)
    assert series["residual_final.p"][0] == (0.005, 1.75264e-07)
    assert series["residual.Ux"][1] == (0.01, 0.1952)
    # the last continuity line of the step wins
    assert series["continuity.local"][0] == (0.005, 1.77232e-09)
    assert series["courant.max"][1] == (0.01, 0.167504)


def test_simplefoam_converged_log() -> None:
    parser, series = _parse("simpleFoam.converged.log")
    assert parser.converged and parser.ended and parser.iterations == 18
    assert parser.last_time == 18.0
    assert [x for x, _ in series["residual.nuTilda"]] == [float(i) for i in range(1, 19)]
    assert series["residual.Ux"][0] == (1.0, 1.0)
    assert "courant.mean" not in series  # simpleFoam prints no Courant number
    assert series["execution.time"][-1] == (18.0, 0.62)


def test_header_time_line_is_not_a_time_step() -> None:
    parser = LogParser()
    assert parser.feed("Time   : 02:25:19") == []
    assert parser.last_time is None


@pytest.mark.parametrize("log", ["icoFoam.fatal.log", "icoFoam.parallel_fatal.log"])
def test_fatal_error_message_is_extracted(log: str) -> None:
    parser, _ = _parse(log)
    assert parser.fatal_error is not None
    assert parser.fatal_error.startswith('FOAM FATAL ERROR: cannot find file "')
    assert "From function" not in parser.fatal_error


def test_fatal_io_error() -> None:
    parser = LogParser()
    for line in [
        "--> FOAM FATAL IO ERROR: ",
        'keyword div(phi,U) is undefined in dictionary "system/fvSchemes.divSchemes"',
        "",
        "file: system/fvSchemes.divSchemes from line 26 to line 31.",
        "",
        "    From function const Foam::entry& Foam::dictionary::lookupEntry",
        "keyword foo",
    ]:
        parser.feed(line)
    assert parser.fatal_error == (
        "FOAM FATAL IO ERROR: keyword div(phi,U) is undefined in dictionary "
        '"system/fvSchemes.divSchemes" file: system/fvSchemes.divSchemes from line 26 to line 31.'
    )


def test_nan_and_inf_are_kept_as_points() -> None:
    parser = LogParser()
    parser.feed("Time = 3")
    parser.feed(
        "smoothSolver:  Solving for Ux, Initial residual = nan, Final residual = -nan, No Iterations 1000"
    )
    parser.feed(
        "GAMG:  Solving for p, Initial residual = inf, Final residual = -inf, No Iterations 3"
    )
    points = {name: y for name, _, y in parser.feed("Time = 4")}
    assert math.isnan(points["residual.Ux"]) and math.isnan(points["residual_final.Ux"])
    assert points["residual.p"] == math.inf and points["residual_final.p"] == -math.inf


def test_sigfpe_crash_is_reported() -> None:
    parser = LogParser()
    parser.feed("#0  Foam::error::printStack(Foam::Ostream&) at ??:?")
    parser.feed("#1  Foam::sigFpe::sigHandler(int) at ??:?")
    assert parser.fatal_error == "floating point exception (sigFpe)"


def test_points_are_emitted_at_execution_time_not_later() -> None:
    parser = LogParser()
    parser.feed("Time = 1")
    assert (
        parser.feed(
            "DILUPBiCG:  Solving for k, Initial residual = 0.5, Final residual = 0.01, No Iterations 2"
        )
        == []
    )
    points = parser.feed("ExecutionTime = 0.5 s  ClockTime = 1 s")
    assert ("residual.k", 1.0, 0.5) in points and ("execution.clock", 1.0, 1.0) in points
    assert parser.feed("Time = 2") == []  # nothing emitted twice


def test_partial_numbers_do_not_crash() -> None:
    parser = LogParser()
    parser.feed("Time = garbage")
    parser.feed(
        "smoothSolver:  Solving for Ux, Initial residual = x, Final residual = y, No Iterations 1"
    )
    assert parser.flush() == []
