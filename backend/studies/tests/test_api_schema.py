"""What the API answers matches what its OpenAPI schema (and so the web UI's generated client)
declares: fields that are null for some objects are declared nullable."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator
from jsonschema import Draft202012Validator

from studies.models import Run
from studies.tests.test_uploads import CONTROL, tgz, upload

SWEEP = {
    "name": "sweep",
    "template": "airfoil2d",
    "parameters": {"aoa": {"values": [0, 4]}},
}


@functools.cache
def api_schema() -> dict[str, Any]:
    """The API's OpenAPI schema, as `manage.py spectacular` makes it (made once)."""
    return SchemaGenerator().get_schema(request=None, public=True)


@pytest.fixture
def openapi() -> dict[str, Any]:
    return api_schema()


def assert_matches(openapi: dict[str, Any], component: str, instance: Any) -> None:
    root = {"components": openapi["components"], "$ref": f"#/components/schemas/{component}"}
    errors = [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in Draft202012Validator(root).iter_errors(instance)
    ]
    assert errors == [], errors


def test_a_template_study_and_its_queued_runs_match_the_schema(api, openapi):
    study = api.post("/api/v1/studies/", SWEEP, format="json").json()
    assert study["case"] is None and study["template"] == "airfoil2d"
    assert_matches(openapi, "Study", study)
    run = api.get(f"/api/v1/studies/{study['id']}/runs/").json()["results"][0]
    assert run["wall_seconds"] is None
    assert_matches(openapi, "Run", run)
    detail = api.get(f"/api/v1/runs/{run['id']}/").json()
    assert_matches(openapi, "RunDetail", detail)


def test_an_ended_runs_wall_time_is_a_number(api, openapi):
    study = api.post("/api/v1/studies/", SWEEP, format="json").json()
    run = Run.objects.filter(study_id=study["id"]).first()
    assert run is not None
    Run.objects.filter(pk=run.pk).update(
        state="completed", started_at=run.queued_at, finished_at=run.queued_at
    )
    detail = api.get(f"/api/v1/runs/{run.pk}/").json()
    assert detail["wall_seconds"] == 0.0
    assert_matches(openapi, "RunDetail", detail)


def test_a_preview_the_catalog_and_the_quota_panel_match_the_schema(api, openapi):
    preview = api.post("/api/v1/studies/preview/", SWEEP, format="json").json()
    assert preview["run_count"] == 2
    assert_matches(openapi, "Preview", preview)
    templates = api.get("/api/v1/templates/").json()
    assert templates
    for template in templates:
        assert_matches(openapi, "Template", template)
    packages = api.get("/api/v1/packages/").json()
    assert packages
    for package in packages:
        assert_matches(openapi, "Package", package)
    assert_matches(openapi, "Quota", api.get("/api/v1/quota/").json())


def test_a_study_of_an_uploaded_case_matches_the_schema(api, openapi):
    case = upload(api, "c.tar.gz", tgz([("system/controlDict", CONTROL, "file")])).json()
    spec = {
        "name": "uploaded",
        "case": case["id"],
        "solver": "icoFoam",
        "parameters": {"end_time": {"values": [0.1]}},
        "derived": {"dt": "end_time / 100"},
        "draft": True,
    }
    study = api.post("/api/v1/studies/", spec, format="json").json()
    assert study["template"] is None and study["case"] == case["id"]
    assert_matches(openapi, "Study", study)


@pytest.mark.parametrize(
    "path, method",
    [
        ("/api/v1/studies/", "post"),
        ("/api/v1/studies/preview/", "post"),
        ("/api/v1/studies/{id}/", "put"),
    ],
)
def test_a_spec_may_be_sent_as_yaml_and_the_schema_says_so(api, openapi, path, method):
    content = openapi["paths"][path][method]["requestBody"]["content"]
    assert content["application/yaml"]["schema"] == content["application/json"]["schema"]
    r = api.post(
        "/api/v1/studies/preview/",
        "name: sweep\ntemplate: airfoil2d\nparameters:\n  aoa: {values: [0, 4]}\n",
        content_type="application/yaml",
    )
    assert r.status_code == 200, r.json()
    assert r.json()["run_count"] == 2
