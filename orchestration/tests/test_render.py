"""Sandboxed rendering and parameter expressions."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from orchestration.case import expressions, render
from orchestration.case.render import (
    FUNCTIONS,
    RenderError,
    evaluate,
    evaluate_derived,
    expression_names,
    find_placeholders,
    render_case,
    render_files,
    render_text,
)

OPENFOAM_TEXT = """FoamFile
{
    version     2.0;
    object      U;
}
#include "initialConditions"
#includeEtc "caseDicts/setConstraintTypes"
{# not a jinja comment #}
{% not a jinja block %}
code
#{
    const scalar x = 1; // {{# braces #}}
#};
internalField   uniform $flowVelocity;
inlet { type fixedValue; value uniform (1 0 0); }
"""


def test_openfoam_syntax_passes_through_untouched() -> None:
    text = OPENFOAM_TEXT.replace("{{# braces #}}", "{ braces }")
    assert render_text(text, {}) == text


def test_placeholders_render_with_functions_and_openfoam_numbers() -> None:
    out = render_text(
        "U ({{ speed*cos(radians(aoa)) }} {{ speed*sin(radians(aoa)) }} 0);\n"
        "n {{ n }}; f {{ f }}; small {{ 1e-5 }}; flag {{ on }}; v {{ v }};\n",
        {"speed": 26, "aoa": 4.0, "n": 3, "f": 2.0, "on": True, "v": [1, 2.5, 0]},
    )
    ux = 26 * math.cos(math.radians(4.0))
    assert out.startswith(f"U ({ux!r} ")
    assert "n 3; f 2.0; small 1e-05; flag true; v (1 2.5 0);" in out
    assert out.endswith("\n")


def test_floats_render_repr_like_from_numpy_like_floats() -> None:
    class NumpyLikeFloat(float):
        def __repr__(self) -> str:
            return f"np.float64({float(self)!r})"

    assert render_text("{{ x }}", {"x": NumpyLikeFloat(25.94)}) == "25.94"


def test_non_finite_values_are_refused() -> None:
    with pytest.raises(RenderError, match="cannot be written"):
        render_text("{{ x }}", {"x": float("nan")})


def test_unknown_name_in_a_file_names_the_file_line_and_known_names() -> None:
    with pytest.raises(RenderError, match=r"0/U line 3: unknown name 'aoa'; known names: speed"):
        render_text("a\nb\nc {{ aoa }}\n", {"speed": 1}, filename="0/U")


def test_template_syntax_error_names_the_file_and_line() -> None:
    with pytest.raises(RenderError, match=r"system/controlDict line 2: template syntax error"):
        render_text("ok\n{{ 1 + }}\n", {}, filename="system/controlDict")


@pytest.mark.parametrize(
    "template",
    [
        "{{ x.__class__.__mro__ }}",
        "{{ x.__class__ }}",
        "{{ ''.__class__.__subclasses__() }}",
        "{{ cycler }}",
        "{{ range(10) }}",
        "{{ 'a' * 1000000 }}",
        "{{ '%0999999d' % 1 }}",
        "{{ x|format(1) }}",
        "{{ 'a'|center(1000000000) }}",
        "{{ sin.__globals__ }}",
    ],
)
def test_sandbox_escapes_and_bombs_are_refused(template: str) -> None:
    with pytest.raises(RenderError):
        render_text(template, {"x": "%s"})


@pytest.mark.parametrize("expr", ["9**(9**9)", "10.0**400", "pow(10, 1000)", "exp(1000)"])
def test_huge_powers_are_refused(expr: str) -> None:
    with pytest.raises(RenderError):
        evaluate(expr, {})


def test_long_expressions_are_refused() -> None:
    with pytest.raises(RenderError, match="limit is 500"):
        evaluate("1+" * 300 + "1", {})


def test_evaluate_uses_names_and_functions() -> None:
    assert evaluate("speed*cos(radians(aoa))", {"speed": 26, "aoa": 0}) == 26.0
    assert evaluate("max(a, b) + pi", {"a": 1, "b": 2}) == 2 + math.pi
    assert evaluate("floor(2.7) + ceil(0.2) + round(1.26, 1)", {}) == 2 + 1 + 1.3


def test_evaluate_unknown_name_lists_known_names() -> None:
    with pytest.raises(
        RenderError, match=r"unknown name 'x' in expression 'x\*2'; known names: a, b"
    ):
        evaluate("x*2", {"a": 1, "b": 2})


@pytest.mark.parametrize("expr", ["1 +", "a b", "(", ""])
def test_syntax_errors_raise_render_error(expr: str) -> None:
    with pytest.raises(RenderError):
        expression_names(expr)


def test_expression_names_excludes_functions() -> None:
    assert expression_names("speed*cos(radians(aoa)) + pi") == {"speed", "aoa"}
    assert expression_names("c") == {"c"}
    assert {"sin", "pow", "pi"} <= FUNCTIONS.keys()


def test_division_by_zero_is_a_render_error() -> None:
    with pytest.raises(RenderError, match="ZeroDivisionError"):
        evaluate("1/a", {"a": 0})


def test_derived_values_resolve_in_dependency_order() -> None:
    derived = {
        "mag": "sqrt(Ux**2 + Uy**2)",
        "Ux": "speed*cos(radians(aoa))",
        "Uy": "speed*sin(radians(aoa))",
    }
    values = evaluate_derived(derived, {"speed": 26.0, "aoa": 4.0})
    assert set(values) == {"mag", "Ux", "Uy"}
    assert values["mag"] == pytest.approx(26.0)


def test_derived_cycles_are_named() -> None:
    with pytest.raises(RenderError, match=r"cycle in derived values: a -> b -> c -> a"):
        evaluate_derived({"a": "b + 1", "b": "c", "c": "a"}, {})
    with pytest.raises(RenderError, match=r"cycle in derived values: x -> x"):
        evaluate_derived({"x": "x + 1"}, {"x": 1})


def test_derived_unknown_name_names_the_derived_value() -> None:
    with pytest.raises(RenderError, match=r"derived value 'Ux': unknown name 'speed'"):
        evaluate_derived({"Ux": "speed*2"}, {"aoa": 1})


def _tree(root: Path) -> Path:
    (root / "0").mkdir(parents=True)
    (root / "system").mkdir()
    (root / "constant/polyMesh").mkdir(parents=True)
    (root / "0/U").write_text("internalField uniform ({{ Ux }} {{ Uy }} 0);\n")
    (root / "system/controlDict").write_text('endTime {{ end }};\n#include "x"\n')
    (root / "system/fvSchemes").write_text("div { default none; }\n")
    (root / "constant/polyMesh/points.gz").write_bytes(b"\x1f\x8b\x08\x00{{ x }}")
    (root / "constant/blob").write_bytes(b"\x00\x01{{ y }}")
    (root / "Allrun").write_text("#!/bin/sh\necho {{ end }}\n")
    (root / "Allrun").chmod(0o755)
    return root


def test_find_placeholders_lists_text_files_only(tmp_path: Path) -> None:
    found = find_placeholders(_tree(tmp_path / "case"))
    assert found == {"0/U": ["Ux", "Uy"], "Allrun": ["end"], "system/controlDict": ["end"]}


def test_find_placeholders_reports_syntax_errors_with_file_and_line(tmp_path: Path) -> None:
    case = _tree(tmp_path / "case")
    (case / "system/fvSolution").write_text("a\nb {{ 1 + }}\n")
    with pytest.raises(RenderError, match=r"system/fvSolution line 2"):
        find_placeholders(case)


def test_render_case_copies_everything_and_renders_templates(tmp_path: Path) -> None:
    src = _tree(tmp_path / "case")
    dst = tmp_path / "out"
    rendered = render_case(src, dst, {"Ux": 1.5, "Uy": 0, "end": 100})
    assert rendered == ["0/U", "Allrun", "system/controlDict"]
    assert (dst / "0/U").read_text() == "internalField uniform (1.5 0 0);\n"
    assert (dst / "system/fvSchemes").read_text() == "div { default none; }\n"
    assert (dst / "constant/blob").read_bytes() == b"\x00\x01{{ y }}"
    assert (dst / "constant/polyMesh/points.gz").read_bytes().startswith(b"\x1f\x8b")
    assert os.access(dst / "Allrun", os.X_OK)


def _tree_bytes(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mode)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_a_case_rendered_by_the_portal_and_copied_by_the_agent_is_the_same_case(
    tmp_path: Path,
) -> None:
    """render_files (portal) + prepare_case(rendered=…) (agent) write byte for byte what
    render_case writes, CRLF templates and binary files included; a changed template is
    read again."""
    from orchestration.agent.case import prepare_case

    src = _tree(tmp_path / "case")
    (src / "system/crlf").write_bytes(b"a {{ Ux }}\r\nb\r\n")
    context = {"Ux": 1.5, "Uy": 0, "end": 100}
    render_case(src, tmp_path / "agent", context)
    texts = render_files(src, context)
    assert sorted(texts) == ["0/U", "Allrun", "system/controlDict", "system/crlf"]
    written = prepare_case(
        case_dir=src, dest=tmp_path / "portal", context={}, decompose=None, rendered=texts
    )
    assert written == sorted(texts)
    assert _tree_bytes(tmp_path / "portal") == _tree_bytes(tmp_path / "agent")
    (src / "0/U").write_text("internalField uniform ({{ Uy }} {{ Ux }} 0);\n")
    assert render_files(src, context)["0/U"] == "internalField uniform (0 1.5 0);\n"


def test_render_case_refuses_symlinks(tmp_path: Path) -> None:
    src = _tree(tmp_path / "case")
    (src / "system/link").symlink_to("/etc/passwd")
    with pytest.raises(RenderError, match="system/link: symbolic links"):
        render_case(src, tmp_path / "out", {"Ux": 1, "Uy": 0, "end": 1})
    assert not (tmp_path / "out").exists()


def test_render_case_refuses_a_non_empty_destination(tmp_path: Path) -> None:
    src = _tree(tmp_path / "case")
    (tmp_path / "out").mkdir()
    (tmp_path / "out/x").write_text("")
    with pytest.raises(RenderError, match="not empty"):
        render_case(src, tmp_path / "out", {})


def test_crlf_files_keep_their_line_endings() -> None:
    assert render_text("a {{ x }}\r\nb\r\n", {"x": 1}) == "a 1\r\nb\r\n"


# -- CPU and memory a template can ask for are bounded by the template sandbox -------------

BLOCK = "\x02\x02%"  # the internal block delimiters, which an upload can write all the same
END = "%\x03\x03"


@pytest.mark.parametrize(
    "template",
    [
        f"{BLOCK} for i in range(100000) {END}{BLOCK} for j in range(1000) {END}x"
        f"{BLOCK} endfor {END}{BLOCK} endfor {END}",
        f"{BLOCK} macro m(n) {END}{{{{ m(n) }}}}{BLOCK} endmacro {END}{{{{ m(1) }}}}",
        f"{BLOCK} set x = 1 {END}{{{{ x }}}}",
    ],
)
def test_only_placeholders_are_template_syntax_loops_and_macros_are_refused(template: str) -> None:
    with pytest.raises(RenderError, match="only {{ … }} placeholders are template syntax"):
        render_text(template, {}, filename="system/controlDict")


def test_a_string_of_a_huge_nested_list_is_refused_before_it_is_built() -> None:
    with pytest.raises(RenderError, match="build more than"):
        render_text("{{ ([[1]*10000]*1000)|string|length }}", {})
    with pytest.raises(RenderError, match="build more than"):
        evaluate("([[1]*10000]*1000)|string|length", {})
    assert render_text("{{ ([1]*3)|string }}", {}) == "[1, 1, 1]"  # small ones still work


def test_many_small_repetitions_add_up_to_the_same_limit() -> None:
    template = "{{ 'x' * 90000 }}" * 20  # each under the per-repetition limit
    with pytest.raises(RenderError, match="build more than"):
        render_text(template, {})
    assert render_text("{{ 'x' * 90000 }}", {}) == "x" * 90000  # one render's budget is fresh


@pytest.mark.parametrize("depth", [99, 400])
def test_deeply_nested_brackets_are_a_render_error_not_a_crash(depth: int) -> None:
    expr = "(" * depth + "1" + ")" * depth
    with pytest.raises(RenderError):
        evaluate(expr[:500] if len(expr) > 500 else expr, {})
    with pytest.raises(RenderError):
        render_text("{{ " + expr + " }}", {})


def test_a_study_has_at_most_200_derived_values() -> None:
    chain = {f"d{i}": f"d{i - 1} + 1" for i in range(1, 300)} | {"d0": "1"}
    with pytest.raises(RenderError, match="at most 200"):
        evaluate_derived(chain, {})
    short = {f"d{i}": f"d{i - 1} + 1" for i in range(1, 150)} | {"d0": "1"}
    assert evaluate_derived(short, {})["d149"] == 150


@pytest.mark.parametrize(
    ("template", "context"),
    [
        # a value that writes a directive only for some runs' values: the upload's check
        # and the first run's rendering see nothing
        ("{{ '#include' if angle > 5 else '' }} \"/etc/passwd\"\n", {"angle": 10}),
        ('{{ name }} "/etc/passwd"\n', {"name": "#includeEtc"}),
        ("x {{ [1, '#codeStream'] }};\n", {}),
        # a placeholder that finishes a directive's name the file starts
        ("#{{ 'include' }} \"/etc/passwd\"\n", {}),
        ('#inc{{ rest }} "/etc/passwd"\n', {"rest": "lude"}),
    ],
)
def test_no_placeholder_can_write_an_openfoam_directive(template: str, context: dict) -> None:
    """A placeholder cannot write an #include that would read the host's files, whatever run's
    values it renders with (each run's rendered text is checked, not only the first's)."""
    with pytest.raises(RenderError, match="'#'"):
        render_text(template, context, filename="system/controlDict")


def test_values_without_a_hash_and_directives_written_out_render() -> None:
    text = '#include "initialConditions"\nU {{ u }}; // run {{ n }}\n'
    assert (
        render_text(text, {"u": 1.5, "n": 3}) == '#include "initialConditions"\nU 1.5; // run 3\n'
    )


def test_derived_values_remembered_across_runs_keep_each_runs_own_types_and_values() -> None:
    derived = {"half": "n / 2", "twice": "n * 2", "fixed": "end / 5"}
    memo: dict = {}
    seen = [render.evaluate_derived(derived, {"n": n, "end": 1.0}, memo) for n in (4, 4.0, 5, 4)]
    assert [s["twice"] for s in seen] == [8, 8.0, 10, 8]
    assert [type(s["twice"]) for s in seen] == [int, float, int, int]  # 4 and 4.0 kept apart
    assert [s["half"] for s in seen] == [2.0, 2.0, 2.5, 2.0]
    assert {s["fixed"] for s in seen} == {0.2}
    # the same results as without remembering
    assert seen == [render.evaluate_derived(derived, {"n": n, "end": 1.0}) for n in (4, 4.0, 5, 4)]
    # a list value cannot be a key: evaluated every time, still right
    vec = render.evaluate_derived({"first": "v[0] * 2"}, {"v": [1.5, 2]}, memo)
    assert vec == {"first": 3.0}


ARITHMETIC = [
    "courant * (0.1 / cells) / lid_velocity",
    "speed * cos(radians(aoa))",
    "-speed * sin(radians(aoa)) + 1",
    "2 ** cells // 3 % 7",
    "max(cells, 3, lid_velocity) - min(1, cells)",
    "pow(2, 10) + abs(-3) + round(2.675, 2) + floor(2.5) + ceil(2.1) + pi",
    "sqrt(cells) * log(10) / log10(100) + exp(0) + atan2(1, 2)",
    "+cells - -1",
]
NAMES = {"courant": 0.5, "cells": 20, "lid_velocity": 1.25, "speed": 30.0, "aoa": 4}


@pytest.mark.parametrize("expr", ARITHMETIC)
def test_arithmetic_takes_the_fast_path_with_the_sandbox_s_own_result(expr: str) -> None:
    """Derived values evaluated for every run of a study go through plain closures when
    they are only arithmetic; the value is the sandbox's, to the last bit and type."""
    fast = expressions._arithmetic(expressions._parse_expression(expr))
    assert fast is not None
    sandboxed = expressions._Expression(expr)(NAMES)
    value = render.evaluate(expr, NAMES)
    assert value == sandboxed and type(value) is type(sandboxed)


@pytest.mark.parametrize(
    "expr",
    [
        "cells.__class__",
        "cells['x']",
        "cells | string",
        "'a' ~ 'b'",
        "cells > 3",
        "[1, 2] * 3",
        "range(3)",
        "lipsum()",
        "cells if cells else 1",
        "True + 1",
    ],
)
def test_anything_but_arithmetic_is_left_to_the_sandbox(expr: str) -> None:
    assert expressions._arithmetic(expressions._parse_expression(expr)) is None


def test_the_fast_path_keeps_the_sandbox_s_limits_and_errors() -> None:
    with pytest.raises(RenderError, match="too large|exponent|power"):
        render.evaluate("9 ** (9 ** 9)", {})
    with pytest.raises(RenderError, match="ZeroDivisionError"):
        render.evaluate("cells / (cells - 20)", NAMES)
    with pytest.raises(RenderError, match="not callable"):
        render.evaluate("sin(1)", {"sin": 2.0})  # a parameter named like a function
