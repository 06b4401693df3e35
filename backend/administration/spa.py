"""The web UI's entry page: every path that is not the API, the admin, static files or a
websocket answers the built single-page app (frontend/dist/index.html); the app's router
takes it from there. Its hashed assets are served by WhiteNoise under /static/.

Without a build, a small page says so and links the API docs instead of failing.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_safe

from core.csp import HEADER, spa_policy

# Paths the SPA never answers: config/urls.py matches real routes first, and this keeps a
# mistyped /api/… URL a 404 instead of the app's HTML.
SPA_PATH_REGEX = r"^(?!(?:api|api-auth|admin|static|ws)(?:/|$)|healthz).*$"

NOT_BUILT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Windtunnel</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem;color:#1d2733}
 code{background:#eef1f4;padding:.1rem .3rem;border-radius:4px} a{color:#1f6fb2}
</style></head>
<body>
<h1>Windtunnel</h1>
<p>The API is running, but the web UI has not been built on this server.</p>
<p>Build it with <code>make run</code> (which builds it when Node.js is installed) or
<code>scripts/build-frontend</code>, then reload this page.</p>
<ul>
 <li><a href="/api/docs/">API documentation</a> (OpenAPI, try it in the browser)</li>
 <li><a href="/api/v1/">Browsable REST API</a></li>
 <li><a href="/admin/">Django admin</a></li>
</ul>
</body></html>
"""


@require_safe
@ensure_csrf_cookie
def spa_index(request: HttpRequest, path: str = "") -> HttpResponse:
    index = settings.ROOT_DIR / "frontend" / "dist" / "index.html"
    try:
        html = index.read_text(encoding="utf-8")
    except FileNotFoundError:
        response = HttpResponse(NOT_BUILT, content_type="text/html; charset=utf-8")
    else:
        response = HttpResponse(html, content_type="text/html; charset=utf-8")
    # The page names the hashed assets of the current build: never cache it.
    response["Cache-Control"] = "no-cache"
    response[HEADER] = spa_policy(request)  # Plotly's WebGL plots need eval (core.csp)
    return response
