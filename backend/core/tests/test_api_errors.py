"""No 500 on any input: a body nested thousands of levels deep is a
parse error, a NUL character that would reach PostgreSQL (whose text cannot hold one) is a
400 naming the parameter, or a 404 for a path lookup."""

from __future__ import annotations

import io
import json

import pytest
from django.db import DataError
from rest_framework.exceptions import ParseError
from rest_framework.test import APIClient, APIRequestFactory
from rest_framework.views import APIView

from core.exceptions import ApplicationError, NotFound, nul_refusal
from core.parsers import MAX_DEPTH, JSONParser


def _nested(depth: int) -> bytes:
    return ("[" * depth + "]" * depth).encode()


def test_the_json_parser_takes_bodies_as_deep_as_the_api_needs():
    assert JSONParser().parse(io.BytesIO(_nested(MAX_DEPTH))) is not None
    spec = {"name": "s", "parameters": {"a": {"values": [1, 2]}}, "objectives": {}}
    assert JSONParser().parse(io.BytesIO(json.dumps(spec).encode())) == spec


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_the_json_parser_refuses_a_body_nested_deeper_with_a_parse_error(depth):
    with pytest.raises(ParseError, match=f"nested more than {MAX_DEPTH} levels deep"):
        JSONParser().parse(io.BytesIO(_nested(depth)))


def test_a_100000_deep_body_on_the_token_endpoint_is_a_400_not_a_500(db):
    """The API's default JSON parser is core.parsers.JSONParser
    (REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]): anonymous endpoints included."""
    client = APIClient(raise_request_exception=False)
    r = client.post("/api/v1/auth/token/", _nested(100_000), content_type="application/json")
    assert r.status_code == 400, r.content[:200]
    assert r.json()["code"] == "parse_error"
    assert f"nested more than {MAX_DEPTH} levels deep" in r.json()["message"]


def test_a_nul_in_a_query_parameter_is_a_400_naming_it(api):
    r = api.get("/api/v1/images/?kind=%00")
    assert r.status_code == 400, r.content
    assert r.json()["field"] == "kind"
    assert "the query parameter kind holds a NUL character (%00)" in r.json()["message"]


def test_a_nul_in_a_path_lookup_is_a_404(api):
    r = api.get("/api/v1/templates/%00/")
    assert r.status_code == 404, r.content
    assert api.get("/api/v1/templates/cav%00ity/").status_code == 404


def _context(path: str = "/", data=None, **kwargs):
    factory = APIRequestFactory()
    raw = factory.get(path) if data is None else factory.post(path, data, format="json")
    request = APIView().initialize_request(raw)
    if data is not None:
        assert request.data == data  # parsed, as the view that failed would have
    return {"request": request, "kwargs": kwargs}


NUL_ERROR = DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")


def test_a_nul_error_is_told_where_the_nul_was():
    found = nul_refusal(NUL_ERROR, _context(pk="a\x00"))
    assert isinstance(found, NotFound) and "pk" in found.message
    found = nul_refusal(NUL_ERROR, _context("/?name=x%00"))
    assert isinstance(found, ApplicationError) and found.field == "name"
    found = nul_refusal(NUL_ERROR, _context(data={"spec": {"tags": ["ok", "b\x00d"]}}))
    assert found is not None and found.field == "spec.tags[1]" and found.status == 400
    # not the request's: the portal's own error, left a 500
    assert nul_refusal(NUL_ERROR, _context("/?name=x", data={"a": "b"})) is None
    assert nul_refusal(DataError("integer out of range"), _context(pk="a\x00")) is None


@pytest.mark.parametrize(
    ("query", "field", "says"),
    [
        ("page=2", "page", "page 2 is past the last page (1); ask for page 1 to 1"),
        ("page=0", "page", "page must be a whole number from 1"),
        ("page=abc", "page", "page must be a whole number from 1"),
        ("page_size=0", "page_size", "page_size must be a whole number from 1 to 1000"),
        ("page_size=5000", "page_size", "page_size must be a whole number from 1 to 1000"),
        ("page_size=-3", "page_size", "page_size must be a whole number from 1 to 1000"),
    ],
)
def test_pagination_out_of_range_is_a_400_naming_the_parameter(api, query, field, says):
    r = api.get(f"/api/v1/studies/?{query}")
    assert r.status_code == 400, r.content
    assert r.json()["field"] == field
    assert says in r.json()["message"]


def test_pages_in_range_and_the_last_page_answer(api):
    for query in ("", "page=1", "page=last", "page_size=1000", "page=1&page_size=1"):
        r = api.get(f"/api/v1/studies/?{query}")
        assert r.status_code == 200, (query, r.content)
        assert r.json()["results"] == []
