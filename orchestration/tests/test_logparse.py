"""The log parser on real OpenFOAM v1912 logs (fixtures produced by running the tutorials)."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from pathlib import Path

import pytest

from orchestration.results.logparse import LogParser

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


# -- feed_block: the fast path gives what the line parser gives --------------------------

_ODD_LINES = [
    "",
    "   ",
    "\t",
    "End",
    " End ",
    "Time = 7s",
    "Time = s",
    "Time = 1_0",
    "Time = nan",
    "Time   : 02:25:19",
    "  Time = 8",
    "[1] Time = 9",
    "[0] [1] GAMG:  Solving for p, Initial residual = 0.5, Final residual = 0.1, No Iterations 3",
    "GAMG:  Solving for p, Initial residual = 5,, Final residual = 1, No Iterations 3",
    "GAMG:  Solving for p, Initial residual = (1 2) 3, Final residual = 1, No Iterations 3",
    "GAMG:  Solving for U, Initial residual = (0.1 0.2 0.3), Final residual = (1e-3 2e-3 3e-3), "
    "No Iterations 4",
    "GAMG:Solving for p, Initial residual = 1, Final residual = 1, No Iterations 3",
    "::  Solving for p, Initial residual = 1, Final residual = 1, No Iterations 3",
    "GAMG:  Solving for U,x, Initial residual = 1, Final residual = 1, No Iterations 3",
    "GAMG:  Solving for p, Initial residual = 1, Final residual = -nan, No Iterations ",
    "GAMG:  Solving for p, Initial residual = inf, Final residual = 1, No Iterations 2\xa0",
    "Courant Number mean: 0.1 max: 0.5",
    "Courant Number mean:  0.1 max: 0.5",
    "Interface Courant Number mean: 0.01 max: 0.2",
    "Courant Number mean: x max: 0.5 trailing",
    "time step continuity errors : sum local = 1e-09, global = abc, cumulative = 3e-21",
    "time step continuity errors : sum local = 1e-09, global = 2e-20, cumulative = 3e-21 more",
    "time step continuity errors (something else)",
    "ExecutionTime = 0.5 s  ClockTime = 1 s",
    "ExecutionTime = 0.5 s ClockTime = 1 s",
    "ExecutionTime = x s  ClockTime = 1 s",
    "Exec something",
    "SIMPLE solution converged in 42 iterations",
    "#1  Foam::sigSegv::sigHandler(int) at ??:?",
    "--> FOAM FATAL ERROR: the mesh is gone",
    "    From function Foam::thing",
    "\x0cTime = 11",
    "deltaT = 0.0001",
    "PIMPLE: iteration 1",
    "Time = 12\r",
]


Series = dict[str, list[tuple[float, float]]]
State = tuple[bool, bool, str | None, str, int]


def _by_lines(lines: list[str]) -> tuple[Series, State]:
    parser = LogParser()
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for line in lines:
        for name, x, y in parser.feed(line):
            series[name].append((x, y))
    for name, x, y in parser.flush():
        series[name].append((x, y))
    return dict(series), _state(parser)


def _by_blocks(lines: list[str], cuts: list[int]) -> tuple[Series, State]:
    parser = LogParser()
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    bounds = [0, *sorted(cuts), len(lines)]
    blocks = [
        parser.feed_block("\n".join(lines[a:b]))
        for a, b in zip(bounds, bounds[1:], strict=False)
        if b > a
    ]
    for columns in [*blocks, parser.flush_block()]:
        for name, (xs, ys) in columns.items():
            series[name].extend(zip(xs, ys, strict=True))
    return dict(series), _state(parser)


def _state(parser: LogParser) -> State:
    return (
        parser.converged,
        parser.ended,
        parser.fatal_error,
        repr(parser.last_time),  # NaN equals NaN
        parser.iterations,
    )


def _same(a: Series, b: Series) -> bool:
    """Equal series, NaN equal to NaN."""
    if a.keys() != b.keys():
        return False
    for name in a:
        if len(a[name]) != len(b[name]):
            return False
        for (x1, y1), (x2, y2) in zip(a[name], b[name], strict=True):
            if not (_eq(x1, x2) and _eq(y1, y2)):
                return False
    return True


def _eq(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("log", sorted(p.name for p in LOGS.iterdir()))
def test_blocks_give_what_lines_give_on_real_logs(log: str) -> None:
    lines = (LOGS / log).read_text().split("\n")
    expected = _by_lines(lines)
    for cuts in ([], [len(lines) // 2], list(range(0, len(lines), 7))):
        got = _by_blocks(lines, cuts)
        assert _same(got[0], expected[0]) and got[1] == expected[1], (log, cuts)


@pytest.mark.parametrize("seed", range(200))
def test_blocks_give_what_lines_give_on_mangled_logs(seed: int) -> None:
    """Real logs with odd lines spliced in and lines cut or padded at random: the fast path
    takes only what the line parser would take the same way."""
    rng = random.Random(seed)
    source = (LOGS / rng.choice(sorted(p.name for p in LOGS.iterdir()))).read_text()
    lines = source.split("\n")
    for _ in range(rng.randint(1, 30)):
        at = rng.randrange(len(lines) + 1)
        kind = rng.random()
        if kind < 0.5:
            lines.insert(at, rng.choice(_ODD_LINES))
        elif at < len(lines) and kind < 0.7:
            lines[at] = lines[at][: rng.randrange(len(lines[at]) + 1)]
        elif at < len(lines) and kind < 0.85:
            lines[at] = rng.choice([" ", "\t", "[0] ", ""]) + lines[at] + rng.choice(["", " "])
        elif at < len(lines):
            lines[at] = lines[at].replace(rng.choice(["1", "0", ",", " "]), rng.choice(["x", ""]))
    cuts = [rng.randrange(len(lines) + 1) for _ in range(rng.randint(0, 6))]
    expected = _by_lines(lines)
    got = _by_blocks(lines, cuts)
    assert _same(got[0], expected[0])
    assert got[1] == expected[1]


def test_a_step_the_solver_never_finished_is_not_an_iteration() -> None:
    """A solver that blows up in its first time step ran no iteration; one that dies in its
    third finished two."""
    crash = [
        "Time = 1",
        "smoothSolver:  Solving for Ux, Initial residual = 1, Final residual = 0.1, No Iterations 2",
        "#0  Foam::error::printStack(Foam::Ostream&) at ??:?",
        "#1  Foam::sigFpe::sigHandler(int) at ??:?",
    ]
    parser = LogParser()
    for line in crash:
        parser.feed(line)
    parser.flush()
    assert parser.fatal_error == "floating point exception (sigFpe)"
    assert parser.iterations == 0 and parser.last_time == 1.0
    parser = LogParser()
    for n in (1, 2):
        parser.feed(f"Time = {n}")
        parser.feed("ExecutionTime = 0.5 s  ClockTime = 1 s")
    for line in [line.replace("Time = 1", "Time = 3") for line in crash]:
        parser.feed(line)
    parser.flush()
    assert parser.iterations == 2
    # the same lines as blocks count the same
    blocks = LogParser()
    blocks.feed_block("Time = 1\nExecutionTime = 0.5 s  ClockTime = 1 s\nTime = 2\n")
    blocks.flush_block()
    assert blocks.iterations == 1
    # a solver that prints no ExecutionTime: the next step or End closes a step
    quiet = LogParser()
    quiet.feed_block("Time = 1\nTime = 2\nEnd\n")
    assert quiet.iterations == 2
