"""The study spec as YAML (`Content-Type: application/yaml`): what the wizard's
"copy as YAML" gives and the CLI keeps is taken where a spec is the body (create, edit,
preview) as its JSON would be; anything JSON could not say, a body too big, too deep or an
alias bomb is the API's usual 400, never a 500 or a Python object."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rest_framework.exceptions import ParseError

from core.parsers import MAX_DEPTH, YAML_MAX_BYTES, YAML_MAX_NODES, YAMLParser

ROOT = Path(__file__).resolve().parents[3]

SWEEP = """\
# the docs' polar (docs/study-spec.md), as the wizard writes it
name: aoa-sweep
description: 2024-05-01 polar      # a date stays text
template: airfoil2d
resources: {processes: 1, memory_gb: 1}
parameters:
  aoa: {range: [-4, 8, 4]}
  speed: {values: [20, 26]}
  iterations: 60
combine: grid
objectives:
  Cl: {series: forceCoeffs.Cl, reduce: mean_last, n: 20}
  LD: {expr: "Cl / Cd"}
  Cd: {series: forceCoeffs.Cd, reduce: last}
"""
AS_JSON = {
    "name": "aoa-sweep",
    "description": "2024-05-01 polar",
    "template": "airfoil2d",
    "resources": {"processes": 1, "memory_gb": 1},
    "parameters": {
        "aoa": {"range": [-4, 8, 4]},
        "speed": {"values": [20, 26]},
        "iterations": 60,
    },
    "combine": "grid",
    "objectives": {
        "Cl": {"series": "forceCoeffs.Cl", "reduce": "mean_last", "n": 20},
        "LD": {"expr": "Cl / Cd"},
        "Cd": {"series": "forceCoeffs.Cd", "reduce": "last"},
    },
}


def parse(text: str | bytes):
    body = text.encode() if isinstance(text, str) else text
    return YAMLParser().parse(io.BytesIO(body), "application/yaml", {"encoding": "utf-8"})


def test_a_yaml_spec_parses_to_what_its_json_says():
    assert parse(SWEEP) == AS_JSON


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("name: [unclosed\n", "line 2, column 1"),
        ("name: !!python/object/apply:os.system ['true']\n", "could not determine a constructor"),
        ("name: x\non: 1\n", "the key True is not text; quote it"),
        ("name: x\nparameters: {a: .nan}\n", "parameters.a: nan is not a finite number"),
        ("name: x\nwhen: !!timestamp 2024-01-01\n", "when: a date value is not JSON"),
        ("name: x\nblob: !!binary aGVsbG8=\n", "blob: a bytes value is not JSON"),
        ("[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2), f"nested more than {MAX_DEPTH} levels"),
        ("[" * 100_000 + "]" * 100_000, f"nested more than {MAX_DEPTH} levels"),
        ("a: " + "x" * YAML_MAX_BYTES, "larger than 256 KiB"),
        (b"name: \xff\xfe\n", "not utf-8 text"),
    ],
)
def test_what_yaml_can_say_and_json_cannot_is_a_parse_error_naming_it(body, says):
    with pytest.raises(ParseError, match="YAML parse error") as refused:
        parse(body)
    assert says in str(refused.value.detail)


def test_an_alias_bomb_is_refused_without_being_walked_out():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 30)]
    with pytest.raises(ParseError, match=f"more than {YAML_MAX_NODES:,} values"):
        parse("\n".join(lines))


def yaml_post(api, path: str, body: str, content_type: str = "application/yaml"):
    return api.generic("POST", path, body.encode(), content_type=content_type)


def test_preview_and_create_take_the_spec_as_yaml_as_they_take_json(api):
    as_yaml = yaml_post(api, "/api/v1/studies/preview/", SWEEP)
    assert as_yaml.status_code == 200, as_yaml.content
    as_json = api.post("/api/v1/studies/preview/", AS_JSON, format="json")
    assert as_yaml.json() == as_json.json()
    assert as_yaml.json()["run_count"] == 8  # 4 angles x 2 speeds

    created = yaml_post(api, "/api/v1/studies/", SWEEP + "draft: true\n")
    assert created.status_code == 201, created.content
    assert created.json()["state"] == "draft" and created.json()["spec"] == AS_JSON

    edited = api.generic(
        "PUT",
        f"/api/v1/studies/{created.json()['id']}/",
        SWEEP.replace("aoa-sweep", "renamed").encode(),
        content_type="application/x-yaml",
    )
    assert edited.status_code == 200, edited.content
    assert edited.json()["name"] == "renamed"


def test_a_yaml_spec_the_api_refuses_is_the_usual_400(api):
    bad = yaml_post(
        api, "/api/v1/studies/preview/", SWEEP.replace("aoa: {range: [-4, 8, 4]}", "aoa: 45")
    )
    assert bad.status_code == 400, bad.content
    assert bad.json()["code"] == "invalid" and bad.json()["field"] == "parameters.aoa"
    assert "above its maximum 20" in bad.json()["message"]

    broken = yaml_post(api, "/api/v1/studies/", "name: x\ntemplate: [cavity\n", "text/yaml")
    assert broken.status_code == 400, broken.content
    assert broken.json() == {
        "code": "parse_error",
        "message": "YAML parse error - line 3, column 1: expected ',' or ']', but got '<stream end>'",
        "field": None,
        "details": None,
    }


def test_yaml_is_taken_only_where_the_body_is_a_spec(api):
    """Elsewhere the request bodies stay JSON (the OpenAPI schema says so)."""
    study = api.post("/api/v1/studies/", {**AS_JSON, "draft": True}, format="json").json()
    extend = yaml_post(api, f"/api/v1/studies/{study['id']}/extend/", "parameters: {aoa: [12]}\n")
    assert extend.status_code == 415, extend.content
    assert extend.json()["code"] == "unsupported_media_type"


@pytest.mark.parametrize(
    ("doc", "first_line", "runs"),
    [("README.md", "# study.yaml", 18), ("docs/cli.md", "# polar.yaml", 18)],
)
def test_the_yaml_specs_in_the_docs_are_taken_as_they_are(api, doc, first_line, runs):
    text = (ROOT / doc).read_text()
    start = text.index(f"```yaml\n{first_line}\n") + len("```yaml\n")
    spec = text[start : text.index("```", start)]
    answer = yaml_post(api, "/api/v1/studies/preview/", spec)
    assert answer.status_code == 200, answer.content
    assert answer.json()["run_count"] == runs
