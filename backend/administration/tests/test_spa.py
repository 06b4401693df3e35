"""The web UI's entry page is served for app paths, never for the API or the admin."""

import pytest
from django.test import Client


@pytest.fixture
def built(tmp_path, settings):
    dist = tmp_path / "frontend" / "dist"
    dist.mkdir(parents=True)
    (dist / "index.html").write_text('<div id="root"></div><script src="/static/assets/a.js">')
    settings.ROOT_DIR = tmp_path
    return dist


@pytest.mark.parametrize("path", ["/", "/studies", "/studies/3f2a/runs?state=running", "/runs/x"])
def test_app_paths_answer_the_built_index(db, built, path):
    r = Client().get(path)
    assert r.status_code == 200
    assert b'<div id="root">' in r.content
    assert r["Cache-Control"] == "no-cache"
    assert "csrftoken" in r.cookies  # the app can POST the login form right away


@pytest.mark.parametrize("path", ["/api/v1/nothing-here/", "/api", "/static/missing.js"])
def test_api_and_static_paths_are_never_the_app(db, built, path):
    r = Client().get(path)
    assert r.status_code == 404
    assert b'<div id="root">' not in r.content


def test_without_a_build_a_helpful_page_links_the_api_docs(db, tmp_path, settings):
    settings.ROOT_DIR = tmp_path
    r = Client().get("/studies")
    assert r.status_code == 200
    assert b"has not been built" in r.content and b"/api/docs/" in r.content


def test_healthz_and_admin_stay_theirs(db, built):
    assert Client().get("/admin/login/").status_code == 200
    assert b'<div id="root">' not in Client().get("/admin/login/").content
