"""Content-Security-Policy (core.csp) on the web UI, the admin, the API docs and the API: pages
load scripts from this origin only and never inline, talk to this origin and its websockets,
and are never framed; everything else may load nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parents[3]


def policy(response) -> dict[str, str]:
    header = response["Content-Security-Policy"]
    return dict((part.strip().split(" ", 1) + [""])[:2] for part in header.split(";"))


def inline_scripts(html: str) -> list[str]:
    """<script> elements without src that a browser would run (not JSON data blocks)."""
    return [
        tag
        for tag in re.findall(r"<script\b[^>]*>", html, re.IGNORECASE)
        if "src=" not in tag and "application/json" not in tag
    ]


@pytest.fixture
def built(tmp_path, settings):
    dist = tmp_path / "frontend" / "dist"
    dist.mkdir(parents=True)
    (dist / "index.html").write_text('<div id="root"></div><script src="/static/assets/a.js">')
    settings.ROOT_DIR = tmp_path
    return dist


def test_the_web_ui_may_load_and_connect_to_its_own_origin_only(db, built, settings):
    settings.ALLOWED_HOSTS = ["windtunnel.example.org"]
    r = Client().get("/studies", HTTP_HOST="windtunnel.example.org")
    csp = policy(r)
    assert csp["default-src"] == "'self'"
    # its own scripts, and eval for Plotly's WebGL plots; nothing inline
    assert csp["script-src"] == "'self' 'unsafe-eval'"
    assert csp["connect-src"] == ("'self' ws://windtunnel.example.org wss://windtunnel.example.org")
    assert csp["frame-ancestors"] == "'none'" and csp["object-src"] == "'none'"
    assert csp["style-src"] == "'self' 'unsafe-inline'"  # Mantine's and Plotly's <style>


def test_the_web_uis_page_has_no_inline_script():
    # the built page is made from this one (Vite adds only <script src> and <link>)
    html = (ROOT / "frontend" / "index.html").read_text()
    assert inline_scripts(html) == []
    assert re.findall(r"\bon[a-z]+=", html) == []


@pytest.fixture
def operator(make_tenant):
    user = make_tenant("ops").user
    user.is_staff = user.is_superuser = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize(
    ("path", "signed_in"),
    [
        ("/admin/login/", False),
        ("/api-auth/login/", False),
        ("/api/docs/", False),
        ("/admin/", True),
        ("/admin/quotas/quota/", True),
        ("/api/v1/", True),  # the browsable API, with its sign-out
    ],
)
def test_the_other_pages_run_no_inline_script_and_no_eval(db, operator, path, signed_in):
    r = (operator if signed_in else Client()).get(path, HTTP_ACCEPT="text/html")
    assert r.status_code == 200
    csp = policy(r)
    assert csp["script-src"] == "'self'"
    assert csp["frame-ancestors"] == "'none'"
    html = r.content.decode()
    assert inline_scripts(html) == []
    assert re.findall(r"<[^>]*\son[a-z]+=", html) == []  # no event handler attributes


def test_the_api_docs_start_script_is_a_file_of_its_own(db):
    page = Client().get("/api/docs/").content.decode()
    (start,) = [s for s in re.findall(r'<script src="([^"]+)"', page) if "script" in s]
    r = Client().get(start)
    assert r.status_code == 200 and "javascript" in r["Content-Type"]
    assert "SwaggerUIBundle" in r.content.decode()


def test_api_responses_may_load_nothing(api):
    for r in (api.get("/api/v1/studies/"), Client().get("/api/v1/nothing/")):
        assert policy(r)["default-src"] == "'none'"
        assert policy(r)["frame-ancestors"] == "'none'"
