"""OpenFOAM's dictionary syntax split as OpenFOAM v1912 splits it (each case checked against
v1912's foamDictionary when this was written; the attacks in test_casecheck.py rely on it)."""

from __future__ import annotations

import struct

import pytest

from orchestration.case.foamtokens import BinaryData, tokenize


def kinds(text: str, **kw) -> list[tuple[str, str]]:
    return [(t.kind, t.text) for t in tokenize(text, **kw)]


def test_comments_strings_words_and_punctuation() -> None:
    text = 'a 1; // c\n/* c */ "q\\"x\\\\y" div(phi,U) x/y [0 1] -lib -1e-3 f(a(b)c)) \'z'
    assert kinds(text) == [
        ("word", "a"),
        ("number", "1"),
        ("punct", ";"),
        ("string", 'q"x\\\\y'),  # \" is a quote, \\ stays two backslashes
        ("word", "div(phi,U)"),  # a word keeps balanced parentheses
        ("word", "x"),
        ("punct", "/"),  # '/' is not a word character: x / y
        ("word", "y"),
        ("punct", "["),
        ("number", "0"),
        ("number", "1"),
        ("punct", "]"),
        ("punct", "-"),  # '-' alone, then a word
        ("word", "lib"),
        ("number", "-1e-3"),
        ("word", "f(a(b)c)"),
        ("punct", ")"),  # a ')' closing nothing ends the word
        ("bad", "'"),  # OpenFOAM refuses a single quote
        ("word", "z"),
    ]
    assert [t.line for t in tokenize('a\n/* \n\n */ b\n\n"c\\\nd" e')] == [1, 4, 6, 7]


def test_a_directive_may_have_space_or_a_comment_between_its_hash_and_its_name() -> None:
    for text in ('# include "x"', '#/* c */include "x"', '#\n  include "x"', '#include"x"'):
        assert kinds(text) == [("directive", "#include"), ("string", "x")], text
    # a word may hold '#' and '$' without starting a directive or a variable
    assert kinds("a#include b$c") == [("word", "a#include"), ("word", "b$c")]


def test_variables_expressions_and_verbatim_code() -> None:
    text = '$a $ b $/c/d $..e ${f} $ {g} ${{ 1 + 2 }} #{ #include "x" #} $:h.i'
    assert kinds(text) == [
        ("variable", "$a"),
        ("variable", "$b"),  # OpenFOAM allows space after '$'
        ("variable", "$/c/d"),
        ("variable", "$..e"),
        ("variable", "${f}"),
        ("variable", "${g}"),
        ("expression", "${{ 1 + 2 }}"),
        ("verbatim", ' #include "x" '),  # code, never a directive
        ("variable", "$:h.i"),
    ]


def test_if_reads_the_rest_of_its_line_so_a_comment_there_hides_nothing_below() -> None:
    tokens = tokenize('#if 1 /* opens\n#include "/etc/passwd"\n*/ a 1;')
    assert [(t.kind, t.text, t.line) for t in tokens[:4]] == [
        ("directive", "#if", 1),
        ("raw", " 1 /* opens", 1),
        ("directive", "#include", 2),
        ("string", "/etc/passwd", 2),
    ]


def test_eval_reads_its_braces_raw_without_comments() -> None:
    assert kinds("x #eval{ $r*2 /* } */ }; y #eval 2 { 1 };") == [
        ("word", "x"),
        ("directive", "#eval"),
        ("raw", " $r*2  "),
        ("punct", ";"),
        ("word", "y"),
        ("directive", "#eval"),
        ("number", "2"),
        ("raw", " 1 "),
        ("punct", ";"),
    ]


def test_reading_stops_where_openfoam_stops() -> None:
    # an unescaped newline in a string, an unclosed comment: OpenFOAM reads nothing after
    assert kinds('a "b\n#include "x"') == [("word", "a")]
    assert kinds('a /* b\n#include "x"') == [("word", "a")]
    # '# {' is verbatim code to v1912 and a block to later versions: marked, not guessed
    assert ("bad", "# {") in kinds("# { x #}")


def test_a_nul_byte_outside_strings_and_comments_is_binary_data() -> None:
    assert kinds('/* \x00 */ a "\x00";') == [("word", "a"), ("string", "\x00"), ("punct", ";")]
    with pytest.raises(BinaryData, match="line 2"):
        tokenize("a 1;\nb \x00;")


def test_placeholders_are_part_of_the_word_or_string_they_stand_in() -> None:
    tokens = tokenize('{{ k }} {{ x }}mm "{{ p }}" plain', templates=True)
    assert [(t.kind, t.text, t.placeholder) for t in tokens] == [
        ("word", "{{ k }}", True),
        ("word", "{{ x }}mm", True),
        ("string", "{{ p }}", True),
        ("word", "plain", False),
    ]


def test_long_runs_of_numbers_are_one_token_that_keeps_the_nesting() -> None:
    points = "(" + " ".join(f"({i} 0 0)" for i in range(200)) + ")"
    tokens = tokenize(f"points {points};\nnext 1;", bulk=True)
    assert [(t.kind, t.text) for t in tokens] == [
        ("word", "points"),
        ("data", "+0"),
        ("punct", ";"),
        ("word", "next"),
        ("number", "1"),
        ("punct", ";"),
    ]
    assert tokens[-3].line == 2


def binary_field(values: bytes, count: int | None = None) -> str:
    """A volScalarField in OpenFOAM's binary format whose raw data is `values`."""
    n = len(values) // 8 if count is None else count
    head = (
        "FoamFile\n{\n    format      binary;\n    class       volScalarField;\n"
        '    arch        "LSB;label=32;scalar=64";\n    object      p;\n}\n'
        "dimensions [0 2 -2 0 0 0 0];\n"
        f"internalField nonuniform List<scalar> \n{n}\n("
    )
    return (head.encode() + values + b")\n;\nboundaryField { }\n").decode("latin-1")


def test_binary_lists_are_skipped_by_their_declared_size() -> None:
    raw = b'#include "/etc/passwd" "l.bs" \x00\x00'
    raw += bytes(-len(raw) % 8) + struct.pack("<2d", 1.5, -2.0)
    tokens = tokenize(binary_field(raw))
    assert not any(t.kind == "directive" or t.text == "l.bs" for t in tokens)
    assert [t.text for t in tokens[-4:]] == [";", "boundaryField", "{", "}"]


def test_binary_data_of_a_size_that_does_not_add_up_cannot_be_read() -> None:
    raw = b"\x00" * 16
    with pytest.raises(BinaryData, match="does not end where it says"):
        tokenize(binary_field(raw, count=5))


def test_a_binary_mesh_list_is_skipped_by_its_headers_class() -> None:
    owner = struct.pack("<4i", 0, 0, 1, 35)  # ')' (41) and '#' (35) among the raw bytes
    text = (
        b'FoamFile { format binary; class labelList; arch "LSB;label=32;scalar=64"; }\n4\n('
        + owner
        + b")\n"
    ).decode("latin-1")
    assert [t.kind for t in tokenize(text)][-3:] == ["punct", "number", "data"]
