"""An attempt that starts from an earlier attempt's write: the write is copied into the new
case without following the earlier case's links, a write cut short is never picked, and
OpenFOAM itself reads the appended start, end and changed settings over the case's own."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestration.agent.resume import (
    ResumeError,
    apply_resume,
    check_resume,
    complete_writes,
    overrides_text,
    source_case,
)
from orchestration.agent.spec import SpecError, parse_spec
from orchestration.tests.conftest import OPENFOAM_ENV

CONTROL = """FoamFile { version 2.0; format ascii; class dictionary; object controlDict; }
application simpleFoam;
startFrom startTime;
startTime 0;
endTime 100;
deltaT 0.5;
"""
SOLUTION = """FoamFile { version 2.0; format ascii; class dictionary; object fvSolution; }
relaxationFactors { fields { p 0.3; } equations { U 0.7; ".*" 0.7; } }
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def attempts(tmp_path: Path) -> tuple[Path, Path]:
    """Attempt 1's case (writes 0, 10, 20 complete; 30 cut short) and attempt 2's rendered
    case, in one run's folder."""
    run = tmp_path / "run"
    old = run / "attempt-1" / "case"
    fields = {"U": "U field\n", "p": "p field\n"}
    _write(old, {f"0/{k}": v for k, v in fields.items()})
    for time, index in (("10", 20), ("20", 40)):
        _write(old, {f"{time}/{k}": f"{v} at {time}\n" for k, v in fields.items()})
        _write(
            old,
            {f"{time}/phi": "phi\n", f"{time}/uniform/time": f"value {time};\nindex {index};\n"},
        )
    _write(old, {"30/U": "U half"})  # p never written: the agent died mid-write
    (old / "20" / "secret").symlink_to("/etc/passwd")
    os.mkfifo(old / "20" / "fifo")
    new = run / "attempt-2" / "case"
    _write(new, {"0/U": "U field\n", "0/p": "p field\n", "system/controlDict": CONTROL})
    _write(new, {"system/fvSolution": SOLUTION})
    return old, new


def test_only_complete_writes_count_and_the_first_time_is_the_start(attempts) -> None:
    old, _new = attempts
    fd = os.open(old, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert complete_writes(fd) == ["10", "20"]
    finally:
        os.close(fd)


def test_latest_write_is_copied_without_links_and_the_end_moves_by_iterations(attempts) -> None:
    old, new = attempts
    assert source_case(str(new.parent), 1) == str(old)
    note, _attempt, _time, before, _map = apply_resume(
        resume={"attempt": 1, "time": "latest", "iterations": 40},
        work_dir=str(new.parent),
        case=str(new),
    )
    assert "time 20 of attempt 1" in note and "until 40" in note  # 20 + 40 × 0.5
    assert before == 40  # the write's own time step index (uniform/time)
    assert (new / "20" / "U").read_text() == "U field\n at 20\n"
    assert (new / "20" / "uniform" / "time").is_file()
    assert not (new / "20" / "secret").exists() and not (new / "20" / "fifo").exists()
    assert not (new / "30").exists()
    control = (new / "system" / "controlDict").read_text()
    assert control.startswith(CONTROL) and "startTime 20;" in control and "endTime 40;" in control


def test_an_initial_field_the_solver_never_writes_leaves_its_writes_complete(tmp_path) -> None:
    """A case may start with the fields of a model it does not use (omega beside k-epsilon):
    its writes are complete without them, and a write short of a field it writes is not."""
    case = tmp_path / "case"
    _write(case, {"0/U": "U\n", "0/k": "k\n", "0/omega": "omega\n"})
    _write(case, {"60/U": "U at 60\n", "60/k": "k at 60\n", "60/nut": "nut\n"})
    _write(case, {"80/U": "U at 80\n"})  # k never written: cut short
    fd = os.open(case, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert complete_writes(fd) == ["60"]
    finally:
        os.close(fd)


def test_a_restart_from_an_earlier_write_with_changed_settings(attempts) -> None:
    old, new = attempts
    apply_resume(
        resume={
            "attempt": 1,
            "time": "10",
            "iterations": None,
            "settings": {
                "fvSolution": {"relaxationFactors.equations.U": "0.5"},
                "controlDict": {"deltaT": "0.25"},
            },
        },
        work_dir=str(new.parent),
        case=str(new),
    )
    assert (new / "10" / "p").read_text() == "p field\n at 10\n" and not (new / "20").exists()
    control = (new / "system" / "controlDict").read_text()
    assert "endTime" not in control[len(CONTROL) :]  # the case's own end stays
    assert "deltaT 0.25;" in control
    assert (
        "relaxationFactors { equations { U 0.5; } }" in (new / "system" / "fvSolution").read_text()
    )


@pytest.mark.skipif(shutil.which("foamDictionary") is None, reason="OpenFOAM is not installed")
def test_openfoam_reads_the_appended_entries_over_the_cases_own(attempts) -> None:
    _old, new = attempts
    apply_resume(
        resume={
            "attempt": 1,
            "time": "20",
            "iterations": 10,
            "settings": {"fvSolution": {"relaxationFactors.equations..*": "0.6"}},
        },
        work_dir=str(new.parent),
        case=str(new),
    )
    env = {**os.environ, **OPENFOAM_ENV}

    def value(rel: str, entry: str, *flags: str) -> str:
        out = subprocess.run(
            ["foamDictionary", "-entry", entry, *flags, str(new / rel)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return out.stdout.strip()

    assert value("system/controlDict", "startTime", "-value") == "20"
    assert value("system/controlDict", "endTime", "-value") == "25"
    assert value("system/controlDict", "startFrom", "-value") == "startTime"
    final = value("system/controlDict", "functions.windtunnelFinalWrite.writeControl", "-value")
    assert final == "onEnd"
    assert value("system/fvSolution", "relaxationFactors.equations.U", "-value") == "0.7"
    assert value("system/fvSolution", "relaxationFactors.fields.p", "-value") == "0.3"
    equations = value("system/fvSolution", "relaxationFactors.equations").split()
    assert equations[equations.index('".*"') + 1] == "0.6;"


def test_a_time_never_written_or_an_unsafe_setting_is_refused(attempts) -> None:
    _old, new = attempts
    work = str(new.parent)
    with pytest.raises(ResumeError, match=r"no complete write at time 30 .*10, 20"):
        apply_resume(resume={"attempt": 1, "time": "30"}, work_dir=work, case=str(new))
    with pytest.raises(ResumeError, match="not allowed"):
        apply_resume(
            resume={"attempt": 1, "settings": {"controlDict": {"deltaT": '1; #include "/etc"'}}},
            work_dir=work,
            case=str(new),
        )
    with pytest.raises(ResumeError, match="not on this machine"):
        apply_resume(resume={"attempt": 7}, work_dir=work, case=str(new))


def test_a_requeued_attempt_without_a_write_starts_from_the_beginning(tmp_path: Path) -> None:
    new = tmp_path / "run" / "attempt-2" / "case"
    _write(new, {"system/controlDict": CONTROL})
    (tmp_path / "run" / "attempt-1" / "case" / "0").mkdir(parents=True)
    assert apply_resume(
        resume={"attempt": 1, "required": False}, work_dir=str(new.parent), case=str(new)
    ) == ("", 0, "", 0, "")
    assert (new / "system" / "controlDict").read_text() == CONTROL


def test_overrides_quote_keys_that_are_not_words() -> None:
    text = overrides_text({"a.b": "1", "div(phi,U)": "Gauss linear"})
    assert "a { b 1; }" in text and '"div(phi,U)" Gauss linear;' in text


def test_run_json_resume_is_checked() -> None:
    base = {
        "run_id": "r",
        "attempt": 2,
        "portal_url": "http://127.0.0.1:1",
        "token": "t",
        "case_dir": "/c",
        "work_dir": "/w",
        "steps": [{"name": "s", "argv": ["true"]}],
    }
    resume = parse_spec({**base, "resume": {"attempt": 1, "time": "20"}}).resume
    assert resume is not None and resume["time"] == "20"
    with pytest.raises(SpecError, match="resume"):
        parse_spec({**base, "resume": [1]})
    check_resume({"attempt": 1, "blend": {"source": "r2", "attempt": 1, "weight": -1}})
    for bad in (
        {"attempt": 0},
        {"attempt": 1, "time": "../x"},
        {"attempt": 1, "iterations": -1},
        {"attempt": 1, "source": "../other"},
        {"attempt": 1, "blend": {"source": "r2", "attempt": 1, "weight": float("nan")}},
        {"attempt": 1, "fallback": {"attempt": "1"}},
        {"attempt": 1, "settings": {"fvSolution": {"a": 1}}},
    ):
        with pytest.raises(ResumeError, match="resume"):
            check_resume(bad)
