"""A case plan checks a run in O(its values) and concludes exactly what the full check
(render every template, check every rendered file) concludes: the same texts, the same
refusals with the same messages, the same rendering errors, whatever the values and
wherever their placeholders stand."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from orchestration.case import casecheck, caseplan, render
from orchestration.case.casecheck import CaseCheckError
from orchestration.case.casefiles import RenderError
from orchestration.case.caseplan import (
    DIGIT_FIRST,
    NUMBER_MAX,
    SIGN_FIRST,
    case_plan,
    numbers_stand_alone,
    value_shape,
)
from orchestration.case.foamtokens import BULK_MIN
from orchestration.case.template_env import placeholder_text

CAVITY = Path(__file__).resolve().parents[2] / "templates" / "cavity"
HEADER = "FoamFile\n{\n    version 2.0;\n    format ascii;\n    class dictionary;\n}\n"
CAVITY_CONTEXT = {
    "lid_velocity": 1.0,
    "cells": 20,
    "end_time": 0.5,
    "nu": 0.01,
    "courant": 0.5,
    "delta_t": 0.0025,
    "write_interval": 0.1,
}


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "passed", call()
    except CaseCheckError as exc:
        return "refused", str(exc)
    except RenderError as exc:
        return "not rendered", str(exc)


def _agree(root: Path, context: Mapping[str, Any]) -> tuple[str, Any]:
    """The plan's conclusion for `context`, asserted equal to the full check's."""
    full = _outcome(lambda: casecheck.render_checked(root, context, etc_dir=None))
    fast = _outcome(lambda: case_plan(root, etc_dir=None).checked(context))
    assert fast == full, (context, fast, full)
    return fast


def _settled(root: Path) -> None:
    """The case's files and directories as if last changed an hour ago."""
    for path in [root, *root.rglob("*")]:
        os.utime(path, ns=(time.time_ns() - 3600 * 10**9,) * 2)


def _case(root: Path, files: Mapping[str, str]) -> Path:
    """A case of `files`, settled: as if written an hour ago (a plan is kept for it)."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _settled(root)
    return root


@pytest.fixture
def count_full_checks(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = casecheck.check_rendered

    def counted(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        real(*args, **kwargs)

    monkeypatch.setattr(casecheck, "check_rendered", counted)
    return calls


def test_the_runs_of_a_sweep_pay_one_full_check_and_get_the_texts_it_would_render(
    count_full_checks,
):
    plan = case_plan(CAVITY, etc_dir=None)
    plan.shapes.clear()
    for i in range(200):
        context = {**CAVITY_CONTEXT, "lid_velocity": 0.1 + i * 0.37, "cells": 10 + i}
        context["delta_t"] = context["courant"] * 0.1 / context["cells"] / context["lid_velocity"]
        assert plan.checked(context) == render.render_files(CAVITY, context)
        assert plan.checked(context, texts=False) is None
    assert len(count_full_checks) == 1
    assert set(plan.shapes.values()) == {True}


def test_a_plan_is_kept_while_the_case_is_unchanged_and_read_again_after_a_change(tmp_path):
    root = _case(tmp_path, {"system/controlDict": HEADER + "endTime {{ x }};\n"})
    (root / "system/controlDict").touch()  # just changed: not kept yet
    assert case_plan(root, etc_dir=None) is not case_plan(root, etc_dir=None)
    _settled(root)
    plan = case_plan(root, etc_dir=None)
    assert case_plan(root, etc_dir=None) is plan
    (root / "system/controlDict").write_text(HEADER + 'endTime {{ x }};\nlibs ("./x.so");\n')
    edited = case_plan(root, etc_dir=None)
    assert edited is not plan
    with pytest.raises(CaseCheckError, match="libs names './x.so'"):
        edited.checked({"x": 1})
    _settled(root)
    plan = case_plan(root, etc_dir=None)
    (root / "system/extra").write_text(HEADER + "{{ x }} 1;\n")  # a new template
    added = case_plan(root, etc_dir=None)
    assert added is not plan and set(added.templates) == {"system/controlDict", "system/extra"}
    _settled(root)
    plan = case_plan(root, etc_dir=None)
    (root / "system/extra").unlink()  # a template gone
    assert set(case_plan(root, etc_dir=None).templates) == {"system/controlDict"}
    _settled(root)
    plan = case_plan(root, etc_dir=None)
    (root / "constant").mkdir()
    _settled(root / "constant")  # a directory made
    assert case_plan(root, etc_dir=None) is not plan


def test_a_shape_counts_plain_numbers_by_their_first_character_and_anything_else_as_itself():
    assert value_shape("12") == value_shape("0.5e-3") == value_shape("7.") == DIGIT_FIRST
    assert value_shape("-1") == value_shape(".5") == value_shape("-.5E+3") == SIGN_FIRST
    too_long = "1" * (NUMBER_MAX + 1)
    for text in (too_long, "1e", "+1", "1 ", " 1", "-", ".", "1;", "inf", "nan", "١", "1\n"):
        assert value_shape(text) == text


# pairs of plain numbers one full check must not stand for: the first passes, the second
# is refused; a plan that let the first decide the shape would pass the second
CLOSE_CALLS = {
    # `#eval N { … }` reads a count and raw text only after a digit: `-3 {` is a dictionary
    "the first character of an #eval count": (
        'application icoFoam;\nk #eval {{ x }} { libs ("./x.so"); };\n',
        "3",
        "-3",
    ),
    # in a word (here a variable's name) a number is no token of its own
    "a number in a variable's name": (
        'application icoFoam;\nlib1 (fieldFunctionObjects);\nlib2 ("./x.so");\nlibs $lib{{ x }};\n',
        "1",
        "2",
    ),
    # a long number makes the run of list characters (512 or more) one bulk token: the full
    # check then finds no list entry after it (libscheck.block_entries) and passes what it
    # refuses when the run is read token by token; the plan follows the full check either way
    "the length of a number in a long list": (
        "application icoFoam;\nfunctions ( (" + " 0" * 240 + ' {{ x }} ) libs ("./x.so") );\n',
        "1" * 30,
        "1",
    ),
}


@pytest.mark.parametrize("name", CLOSE_CALLS)
def test_a_number_whose_characters_change_how_the_file_reads_gets_the_full_check(tmp_path, name):
    template, passes, refused = CLOSE_CALLS[name]
    root = _case(tmp_path, {"system/controlDict": HEADER + template})
    assert _agree(root, {"x": passes})[0] == "passed"
    assert _agree(root, {"x": refused})[0] == "refused"


def test_numbers_stand_alone_only_as_whole_tokens_outside_quotes_and_binary_data():
    def alone(text: str, value: str = "12") -> bool:
        return numbers_stand_alone(text, [(text.index(value), len(value))])

    assert alone("a 12;\n") and alone("a (12 0 0);\n") and alone("a 12; // note\n")
    assert not alone("a -12;\n", "12")  # the minus makes it another number
    assert not alone("a x12;\n", "12")  # part of a word
    assert not alone('a "12";\n') and not alone("a /* 12 */ 1;\n") and not alone("a $x12;\n")
    assert not alone("#if 12\n") and not alone('"a" 12 "b";\n')
    assert not alone("FoamFile { format binary; }\nx 12;\n")
    assert not alone("a (" + " 0" * (BULK_MIN // 2) + " 12 );\n")  # a bulk token
    assert not alone("a (" + " 0" * (BULK_MIN // 2 - 10) + " 12 );\n")  # one if 30 digits long
    assert alone("a (" + " 0" * ((BULK_MIN - NUMBER_MAX) // 2 - 4) + " 12 );\n")


# where a placeholder may stand: after and before these
BEFORE = [
    "k ",
    "k\t",
    "k (",
    "k ( 1 ",
    "k -",
    "k .",
    "k 1",
    "k x",
    "k $",
    "k $a",
    "libs $lib",
    "k ${",
    "k #eval ",
    "k #eval {",
    'k "',
    'k "a" ',
    "// ",
    "/* ",
    "#if ",
    "#include ",
    "# ",
    "k #",
    "k [",
    "k {",
    "libs (",
    "libs ",
    '"li.s" (',
    "",
    "FoamFile ",
    "k e",
    "functions ( (" + " 0" * 240 + " ",
    "k (" + " 1" * 250 + " ",
]
AFTER = [
    ";",
    " ;",
    ")",
    " 0 0);",
    '"',
    '";',
    " */",
    "e5;",
    "abc;",
    ".5;",
    "(1 2);",
    " { }",
    "/libs;",
    "}",
    "",
    "; // note",
    ' "b";',
    ' { libs ("./x.so"); };',
    ' ) libs ("./x.so") );',
    "-",
    "1;",
    "(",
    "\n}",
]
PLACEHOLDERS = ["{{ x }}", "{{ y }}", "{{ x|trim }}", "{{ n * 2 }}", "{{ x }}{{ y }}"]
REALS = st.one_of(st.integers(-(10**9), 10**9), st.floats(-1e9, 1e9, width=32))
NUMBERS = st.one_of(
    st.from_regex(caseplan.NUMBER, fullmatch=True),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers().map(str),
    st.sampled_from(["0", "-0", "1.", ".5", "-.5", "1e5", "1E-05", "007", "1" * 30, "9" * 33]),
)
HOSTILE = st.one_of(
    st.sampled_from(
        [
            ";",
            "}",
            "{",
            ")",
            "(",
            '"',
            "'",
            "\n",
            "/*",
            "*/",
            "//",
            "$FOAM_CASE",
            "${x}",
            "#include",
            "#{",
            "libs",
            '("./x.so")',
            "libs\n(",
            "1;libs",
            "1 2",
            "1\n",
            " 1",
            "-",
            ".",
            "e",
            "1e",
            "+1",
            "١٢",
            "inf",
            "1(",
            "a\\",
        ]
    ),
    st.text(alphabet="0123456789.-+eE;{}()#$/*\"'\\ \nlibsx", max_size=8),
)
VALUES = st.one_of(*[NUMBERS] * 6, HOSTILE, st.integers(), st.floats())
# where most placeholders stand in real cases (and where the plan's shapes count)
PLAIN_BEFORE = ["k ", "k (", "k ( 1 ", "k\t", "k #eval ", "k (" + " 1" * 200 + " "]
PLAIN_AFTER = [";", " ;", ")", " 0 0);", "; // note", "\n}", ' ) libs ("./x.so") );']


@st.composite
def templates(draw: st.DrawFn) -> dict[str, str]:
    plain = draw(st.booleans())  # only where placeholders stand in real cases
    lines = [
        draw(st.sampled_from(PLAIN_BEFORE if plain else BEFORE))
        + draw(st.sampled_from(PLACEHOLDERS))
        + draw(st.sampled_from(PLAIN_AFTER if plain else AFTER))
        for _ in range(draw(st.integers(1, 3)))
    ]
    body = "application icoFoam;\n" + "\n".join(lines) + "\n"
    files = {"system/controlDict": (HEADER if draw(st.booleans()) else "") + body}
    if draw(st.booleans()):  # a second template, included by the first
        before = draw(st.sampled_from(PLAIN_BEFORE if plain else BEFORE))
        files["system/inc"] = HEADER + before + "{{ y }};\n"
        files["system/controlDict"] += '#include "inc"\n'
    return files


# the property tests: many cases each, however slow a case's rendering
PROPERTY = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@PROPERTY
@given(
    files=templates(),
    contexts=st.lists(
        st.fixed_dictionaries({"x": VALUES, "y": VALUES, "n": st.one_of(REALS, VALUES)}),
        min_size=2,
        max_size=12,
    ),
)
@example(
    files={"system/controlDict": HEADER + CLOSE_CALLS["the length of a number in a long list"][0]},
    contexts=[{"x": "1" * 30, "y": 1, "n": 1}, {"x": "1", "y": 1, "n": 1}],
)
@example(
    files={"system/controlDict": HEADER + 'k #eval {{ x }} { libs ("./x.so"); };\n'},
    contexts=[{"x": 3, "y": 1, "n": 1}, {"x": -3, "y": 1, "n": 1}, {"x": ".5", "y": 1, "n": 1}],
)
def test_the_plan_concludes_what_the_full_check_concludes_for_any_values_in_any_place(
    files, contexts
):
    with tempfile.TemporaryDirectory() as tmp:
        root = _case(Path(tmp), files)
        for context in contexts:  # a plan keeps what earlier runs concluded
            _agree(root, context)


@PROPERTY
@given(
    files=templates(),
    contexts=st.lists(
        st.fixed_dictionaries({"x": NUMBERS, "y": NUMBERS, "n": REALS}), min_size=4, max_size=16
    ),
)
def test_one_full_check_stands_for_the_numbers_of_its_shape_only_where_they_stand_alone(
    files, contexts
):
    with tempfile.TemporaryDirectory() as tmp:
        root = _case(Path(tmp), files)
        for context in contexts:
            _agree(root, context)


@pytest.mark.parametrize(
    "value",
    [0, -7, 10**40, 1.5, -0.0, 1e-300, 2.5e16, True, False, "1.5", "a b", [1, 2.5], (0.1,), 7.0],
)
def test_a_bare_placeholder_writes_what_jinja_writes(value):
    assert placeholder_text(value) == render.render_text("{{ x }}", {"x": value})


@pytest.mark.parametrize("value", [float("inf"), float("nan"), "#include", [1, "#"]])
def test_a_bare_placeholder_refuses_what_jinja_refuses(value):
    with pytest.raises(RenderError) as jinja:
        render.render_text("{{ x }}", {"x": value})
    with pytest.raises(RenderError) as plain:
        placeholder_text(value)
    assert str(jinja.value).endswith(str(plain.value))
