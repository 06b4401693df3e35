"""The case checks, acting as an attacker would: dictionaries that make OpenFOAM read a file
outside the case or load a library of the case are refused, naming the file and line, in
every form OpenFOAM reads; what real cases write passes (every OpenFOAM tutorial)."""

from __future__ import annotations

import gzip
import os
import shutil
import struct
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from orchestration.case import casecheck
from orchestration.case.casecheck import CaseCheckError, check_case, check_rendered, etc_folder
from orchestration.case.casefiles import RenderError
from orchestration.tests.conftest import OPENFOAM_ENV, TUTORIALS

ETC = etc_folder("/usr/share/openfoam")
HEADER = "FoamFile\n{\n    version 2.0;\n    format ascii;\n    class dictionary;\n}\n"
needs_etc = pytest.mark.skipif(ETC is None, reason="OpenFOAM's etc folder is not installed")
needs_foam_dictionary = pytest.mark.skipif(
    shutil.which("foamDictionary") is None or ETC is None,
    reason="OpenFOAM (foamDictionary) is not installed",
)


def make_case(root: Path, files: Mapping[str, str | bytes]) -> Path:
    """A case with `files` (relative path: text, a FoamFile header of 6 lines added to the
    dictionaries directly in system/ and constant/ that have none)."""
    files = {"system/controlDict": "application icoFoam;\n", **files}
    for rel, body in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            path.write_bytes(body)
            continue
        top = rel.count("/") == 1 and rel.startswith(("system/", "constant/"))
        needs_header = top and "FoamFile" not in body
        path.write_text((HEADER if needs_header else "") + body)
    return root


def refusal(case: Path) -> str:
    with pytest.raises(CaseCheckError) as info:
        check_case(case, etc_dir=ETC)
    return str(info.value)


# -- what a search line by line misses ---------------------------------------------------------

SECRET = "leaked_secret_value"


def _up_to_root() -> str:
    return "/".join([".."] * len(Path(ETC or "/usr/share/openfoam/etc").parts[1:]))


BYPASSES = {
    "an absolute path read by #sincludeEtc": '#sincludeEtc "{secret}"\n',
    "a variable inside an #includeEtc path": 'dd "..";\n#includeEtc "caseDicts/$dd/{up}{secret}"\n',
    "libs as a quoted keyword": '"libs" ("./lib/x.so");\n',
    "libs through a variable": 'mylibs ("./lib/x.so");\nlibs $mylibs;\n',
    "libs after a comment on its line": '/* loads our code */ libs ("./lib/x.so");\n',
}


def _bypass(name: str, secret: Path) -> str:
    return BYPASSES[name].format(secret=secret, up=_up_to_root())


@pytest.mark.parametrize("name", BYPASSES)
def test_what_a_line_by_line_search_misses_is_refused_naming_file_and_line(tmp_path, name):
    secret = tmp_path / "secret"
    secret.write_text(f"stolen {SECRET};\n")
    case = make_case(
        tmp_path / "case", {"system/controlDict": HEADER + "x 1;\n" + _bypass(name, secret)}
    )
    message = refusal(case)
    line = 9 if "mylibs" in BYPASSES[name] or "dd " in BYPASSES[name] else 8
    assert message.startswith(f"system/controlDict line {line}: "), message


@needs_foam_dictionary
@pytest.mark.parametrize("name", BYPASSES)
def test_openfoam_really_follows_each_refused_dictionary(tmp_path, name):
    """OpenFOAM v1912 itself reads the file outside the case, or the library path, from each
    refused dictionary: the refusals are attacks, not false alarms."""
    secret = tmp_path / "secret"
    secret.write_text(f"stolen {SECRET};\n")
    dictionary = tmp_path / "dict"
    dictionary.write_text(HEADER + _bypass(name, secret))
    env = {**os.environ, **OPENFOAM_ENV}
    if "libs" in name:
        args = ["foamDictionary", "-entry", "libs", "-value", str(dictionary)]
        needle = "./lib/x.so"
    else:
        args, needle = ["foamDictionary", "-expand", str(dictionary)], SECRET
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert needle in out.stdout, out.stdout + out.stderr


# -- generated variants ---------------------------------------------------------------------

LIBS_FORMS = [
    'libs ("{p}");',
    '"libs" ("{p}");',
    'libs\n(\n    fieldFunctionObjects\n    "{p}"\n);',
    'libs /* a */ ( /* b */ "{p}" );',
    '// {p}\nlibs 1("{p}");',
    'x 1; libs ("{p}");',
    '"(libs|other)" ("{p}");',
    '"l[i]bs" ("{p}");',
    '".*" ("{p}");',
    '"functions/f/libs" ("{p}");',
    'functionObjectLibs ("{p}");',
    'motionSolverLibs ("{p}");',
    'geometricGAMGAgglomerationLibs ("{p}");',
    'a ("{p}");\nb $a;\nc $b;\nlibs $c;',
    'd {{ e ("{p}"); }}\nlibs $d.e;',
    'd {{ e ("{p}"); }}\nf {{ libs $..d.e; }}',
    'd {{ e ("{p}"); }}\nf {{ g {{ libs $:d.e; }} }}',
    'd {{ e ("{p}"); }}\nlibs $/d/e;',
    'mylibs ("{p}");\nlibs ${{mylibs}};',
    "libs $undefinedLibs;",
    'libs #include "libsList";',
    'libs #calc "1";',
    'libs ( #{{ "{p}" #}} );',
    '( libs ("{p}"); )',
    '2 ( f {{ libs ("{p}"); }} g {{ }} )',
    'functions ( f {{ type x; libs ("{p}"); }} );',
]
WRAPPERS = {
    "at the top": "{body}",
    "in a sub-dictionary": "functions\n{{\n    f\n    {{\n        type x;\n{body}\n    }}\n}}",
    "inside #ifeq": "#ifeq a a\n{body}\n#endif",
}
PATHS = ["./x.so", "/case/x.so", "$FOAM_CASE/x.so", "lib/x.so", "../x.so", "<case>/x.so"]


@pytest.mark.parametrize("wrapper", WRAPPERS)
@pytest.mark.parametrize("index", range(len(LIBS_FORMS)))
def test_a_libs_list_naming_a_file_is_refused_in_every_form(tmp_path, wrapper, index):
    body = LIBS_FORMS[index].format(p=PATHS[index % len(PATHS)])
    text = WRAPPERS[wrapper].format(body=body)
    case = make_case(tmp_path, {"system/controlDict": text, "system/libsList": '("./x.so")\n'})
    message = refusal(case)
    assert message.startswith("system/controlDict line "), message


INCLUDE_FORMS = [
    '#include "/etc/passwd"',
    '# include "/etc/passwd"',
    '#/* hidden */include "/etc/passwd"',
    '#include\n"/etc/passwd"',
    '#includeIfPresent "../../../../etc/passwd"',
    '#sinclude "$HOME/.ssh/id_rsa"',
    '#include "~/secret"',
    '#include "$FOAM_CASE/../other-tenant/case/constant/x"',
    '#include "${FOAM_CASE}/../x"',
    '#include "<constant>/../../x"',
    '#include "<etc>/controlDict"',
    '#include "constant/../../x"',
    '#include "$nope/etc/passwd"',
    '#include "${nope:-/etc}/passwd"',
    '#include "/e tc/passwd"',
    '#includeEtc "/etc/passwd"',
    '#sincludeEtc "../../../../etc/passwd"',
    '#includeEtc "caseDicts/../../../etc/passwd"',
    'dd "..";\n#includeEtc "caseDicts/${dd}/controlDict"',
    'dd "../../..";\n#include "$dd/etc/passwd"',
    'd { p "../../.."; }\n#include "$d.p/etc/passwd"',
    'FOAM_CASE "/etc";\n#include "$FOAM_CASE/passwd"',
    'dd "sub";\n#remove dd\n#include "$dd/etc/passwd"',
    '#ifeq a b\ndd "sub";\n#endif\n#include "$dd/etc/passwd"',
    '#codeStream { code #{ #}; }\n#include "$dd/etc/passwd"',
    'dd #include "include/initialConditions";\n#include "$dd/etc/passwd"',
    'x #include "/etc/passwd";',
    'x ( { #include "/etc/passwd" } );',
    '#if 1 /* the rest of this line is the condition\n#include "/etc/passwd"\n*/',
    '#include "include/escape"',
    "#unknownDirective x;",
    '#word "libs"',
]


@pytest.mark.parametrize("wrapper", WRAPPERS)
@pytest.mark.parametrize("form", INCLUDE_FORMS)
def test_an_include_leaving_the_case_is_refused_in_every_form(tmp_path, wrapper, form):
    text = WRAPPERS[wrapper].format(body=form)
    files = {
        "system/controlDict": text,
        "system/include/initialConditions": "x 1;\n",
        "system/include/escape": '#include "../../../x"\n',  # from an included file
    }
    message = refusal(make_case(tmp_path, files))
    assert message.startswith("system/"), message
    assert " line " in message.split(":")[0], message


def test_a_file_that_is_not_a_dictionary_is_searched_for_includes_too(tmp_path):
    case = make_case(tmp_path, {"Allrun": '#!/bin/sh\n# notes\nx #include "/etc/passwd";\n'})
    assert refusal(case).startswith("Allrun line 3: #include '/etc/passwd'")


ALLOWED = [
    '#include "include/initialConditions"',
    '#include "$FOAM_CASE/constant/extra"',
    '#include "${FOAM_CASE}/constant/extra"',
    '#include "<constant>/extra"',
    '#include "../constant/extra"',
    '#sinclude "include/missing"',
    'dd "include";\n#include "$dd/initialConditions"',
    'd { p include; }\n#include "$d.p/initialConditions"',
    'libs (fieldFunctionObjects "libforces.so" libturbulenceModels.so);',
    "l (a b);\nlibs $l;",
    'functions { #includeFunc mag(U)\n #includeFunc "residuals" }',
    'x #calc "1 + 2";',
    "#ifeq $a b\ny 1;\n#else\ny 2;\n#endif",
    '#remove ( "x.*" y )',
    "#inputMode merge\nz 1;",
    "#default w 1;",
    "p { $q; }\nq { r 1; }\ns { $q }",
]


@needs_etc
@pytest.mark.parametrize(
    "form",
    [*ALLOWED, '#includeEtc "caseDicts/setConstraintTypes"', '#sincludeEtc "controlDict"'],
)
def test_what_real_cases_write_passes(tmp_path, form):
    files = {
        "system/controlDict": WRAPPERS["in a sub-dictionary"].format(body=form),
        "system/include/initialConditions": "x 1;\n",
        "constant/extra": "y 2;\n",
        "Allrun": "#!/bin/sh\ncd ${0%/*} || exit 1\n# libs for the run\n",
    }
    check_case(make_case(tmp_path, files), etc_dir=ETC)


def test_an_include_in_an_included_file_is_checked_where_it_is(tmp_path):
    files = {
        "system/controlDict": '#include "include/a"\n',
        "system/include/a": 'dd "..";\n#include "b"\n',
        "system/include/b": '#include "$dd/$dd/$dd/etc/passwd"\n',
    }
    message = refusal(make_case(tmp_path, files))
    assert message.startswith("system/include/b line 1 (included from system/include/a line 2 ")


def test_a_nul_byte_in_a_comment_does_not_hide_the_rest_of_a_file(tmp_path):
    """OpenFOAM does not care for a NUL byte in a comment: the check reads on too."""
    text = HEADER + "/* \x00 */\n" + "x 1;\n" * 5000 + '#include "/etc/passwd"\n'
    case = make_case(tmp_path, {"system/fvSolution": text.encode("latin-1")})
    assert refusal(case).startswith("system/fvSolution line 5008:")


def test_an_include_after_megabytes_of_numbers_is_found(tmp_path):
    points = "\n".join(f"({i} {i} 0)" for i in range(1_000_000))
    text = f'{HEADER}points\n(\n{points}\n);\n#sinclude "/etc/passwd"\n'
    case = make_case(tmp_path, {"constant/points": text})
    assert refusal(case).startswith("constant/points line 1000010:")


def _binary(cls: str, body: bytes) -> bytes:
    head = f'FoamFile\n{{\n    format binary;\n    class {cls};\n    arch "LSB;label=32;scalar=64";\n}}\n'
    return head.encode() + body


def test_openfoams_binary_mesh_and_fields_pass_whatever_their_bytes(tmp_path):
    tricky = b'#include "/etc/passwd" libs "l.bs"\x00'
    tricky += bytes(-len(tricky) % 24)
    points = _binary("vectorField", f"{len(tricky) // 24}\n(".encode() + tricky + b")\n")
    owner = _binary("labelList", b"5\n(" + struct.pack("<5i", 0, 35, 41, 40, 0) + b")\n")
    field = _binary(
        "volVectorField",
        b"dimensions [0 1 -1 0 0 0 0];\ninternalField nonuniform List<vector> "
        + f"{len(tricky) // 24}\n(".encode()
        + tricky
        + b");\nboundaryField { wall { type noSlip; } }\n",
    )
    files = {"constant/polyMesh/points": points, "constant/polyMesh/owner": owner, "0/U": field}
    check_case(make_case(tmp_path, files), etc_dir=ETC)


def test_binary_data_that_cannot_be_read_is_refused_when_it_holds_an_include(tmp_path):
    picture = b"\x89PNG\r\n\x1a\n\x00\x00" + b'#include "/etc/passwd"' + b"\x00\xff"
    message = refusal(make_case(tmp_path, {"doc/figure.png": picture}))
    assert message.startswith("doc/figure.png: binary data holding '#include'"), message
    other = b'\x89PNG\r\n\x1a\n\x00\x00 notes \x00 "l.bs" \xff'
    assert refusal(make_case(tmp_path / "b", {"doc/figure.png": other})).startswith(
        "doc/figure.png: binary data holding '\"l.bs\"'"
    )
    plain = b'\x89PNG\r\n\x1a\n\x00\x00 pixels # and " quotes " \xff'
    check_case(make_case(tmp_path / "c", {"doc/figure.png": plain}), etc_dir=ETC)


def test_a_placeholder_that_reveals_a_commented_libs_is_caught_when_rendered(tmp_path):
    """At upload the libs is inside a comment; values `*/` and `/*` open it for a run."""
    template = HEADER + '/* {{ c }} libs ("/case/x.so"); {{ d }} */\n'
    case = make_case(tmp_path, {"system/controlDict": template})
    check_case(case, etc_dir=ETC)  # as uploaded: a comment
    rendered = template.replace("{{ c }}", "*/").replace("{{ d }}", "/*")
    with pytest.raises(CaseCheckError, match="system/controlDict line 7: libs names"):
        check_rendered(case, {"system/controlDict": rendered}, etc_dir=ETC)


def test_a_template_included_by_a_plain_file_cannot_steer_its_includes(tmp_path):
    files = {
        "system/vars": "dd {{ where }};\n",
        "system/controlDict": '#include "vars"\n#includeEtc "caseDicts/$dd/controlDict"\n',
    }
    message = refusal(make_case(tmp_path, files))
    assert "system/controlDict line 8: #includeEtc 'caseDicts/$dd/controlDict': $dd" in message
    assert "system/vars (a template) may set any entry here" in message


def test_a_placeholder_cannot_be_an_include_path_or_a_library(tmp_path):
    for body, needle in [
        ('#include "{{ where }}"', "an include path cannot be a placeholder"),
        ("libs ({{ lib }});", "a placeholder"),
        ("{{ '#inc' ~ 'lude' }} \"/etc/passwd\"", "a placeholder cannot write '#'"),
    ]:
        case = make_case(tmp_path / str(len(needle)), {"system/controlDict": body})
        assert needle in refusal(case), body


# -- no false alarms ------------------------------------------------------------------------------


def _tutorial_cases() -> list[Path]:
    return sorted(
        {
            p.parent.parent
            for p in TUTORIALS.rglob("controlDict*")
            if p.parent.name == "system" and p.name in ("controlDict", "controlDict.gz")
        }
    )


@needs_etc
def test_every_openfoam_tutorial_passes_or_is_refused_for_its_links_only():
    """Every case of Debian's openfoam-examples passes as it is packaged (gzipped), but 21
    whose packaging made symbolic links: refused for those, and their other files pass."""
    cases = _tutorial_cases()
    if not cases:
        pytest.skip("the OpenFOAM tutorials are not installed")
    refused, linked = {}, []
    for case in cases:
        name = str(case.relative_to(TUTORIALS))
        try:
            check_case(case, etc_dir=ETC)
        except RenderError as exc:
            if "symbolic links" not in str(exc) or isinstance(exc, CaseCheckError):
                refused[name] = str(exc)
                continue
            linked.append(name)
            regular = [
                os.path.relpath(os.path.join(d, f), case)
                for d, dirs, names in os.walk(case)
                for f in names
                if not os.path.islink(os.path.join(d, f))
            ]
            try:
                check_case(case, etc_dir=ETC, rels=regular)
            except CaseCheckError as inner:
                refused[name] = str(inner)
    assert refused == {}
    assert len(cases) == 383 and len(linked) == 21


def test_a_file_too_large_to_read_whole_is_searched_for_includes(tmp_path, monkeypatch):
    """Past MAX_FILE_BYTES (as OpenFOAM reads it, gzip unpacked) or MAX_TOKENS a file is not
    read as a dictionary, and what could hide an include or a libs in it is refused."""
    monkeypatch.setattr(casecheck, "MAX_FILE_BYTES", 1 << 20)
    monkeypatch.setattr(casecheck, "MAX_TOKENS", 10_000)
    words = HEADER + "names (" + " w" * 20_000 + ");\n"  # under 1 MB, over 10,000 tokens
    numbers = HEADER + "values (" + " 1.5" * 400_000 + ");\n"  # over 1 MB unpacked
    files: list[tuple[str, str | bytes]] = [
        ("constant/names", words),
        ("constant/values.gz", gzip.compress(numbers.encode())),
    ]
    for rel, body in files:
        check_case(make_case(tmp_path / rel, {rel: body}), etc_dir=ETC)
        hidden = (
            body + '#include "/etc/passwd"\n'
            if isinstance(body, str)
            else gzip.compress((numbers + '#/* long comment */include "/etc/passwd"\n').encode())
        )
        message = refusal(make_case(tmp_path / f"{rel}-hidden", {rel: hidden}))
        assert message.startswith(f"{rel}: large file holding '#"), message
    monkeypatch.setattr(casecheck, "MAX_STREAM_BYTES", 2 << 20)
    bomb = gzip.compress(b" " * (3 << 20))
    message = refusal(make_case(tmp_path / "bomb", {"constant/bomb.gz": bomb}))
    assert message == "constant/bomb.gz is larger than 2 MB as OpenFOAM reads it", message
