"""Content-Security-Policy on every response (ContentSecurityPolicyMiddleware).

Pages (text/html: the web UI, the admin, the browsable API, Swagger UI) may load scripts,
styles, fonts and images from this origin only, talk to this origin only (its websockets
included), never be framed, and post forms only here. Scripts are never inline: Vite's build
has none, the admin and the browsable API have none, and Swagger UI is served split (its
start script is a file of its own). Styles may be inline: Mantine and Plotly add <style>
elements at run time, and the admin's and Swagger UI's templates carry style attributes.

The web UI's page alone also allows eval: Plotly's WebGL traces (scattergl, the live residual
and series plots) compile their shaders' glue code with `Function` (regl). `spa_policy` is
that policy; the page's view sets it (a response that has a policy keeps it).

Everything else (JSON, files) gets the strictest policy: nothing may load or frame it.
"""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponseBase

HEADER = "Content-Security-Policy"

NONE_POLICY = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"


def page_policy(request: HttpRequest, *, allow_eval: bool = False) -> str:
    """The policy of an HTML page served to `request` (its websockets go to the same host)."""
    try:
        host = request.get_host()
    except DisallowedHost:  # the page says so; it needs no websocket
        host = ""
    sockets = f" ws://{host} wss://{host}" if host else ""
    script = "'self' 'unsafe-eval'" if allow_eval else "'self'"
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src {script}",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data: blob:",
            "font-src 'self' data:",
            f"connect-src 'self'{sockets}",
            "object-src 'none'",
            "base-uri 'self'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )


def spa_policy(request: HttpRequest) -> str:
    """The web UI's page: the page policy, with eval for Plotly's WebGL plots."""
    return page_policy(request, allow_eval=True)


class ContentSecurityPolicyMiddleware:
    """Sets the policy of each response that has none yet: a page's, or for anything that
    is not HTML the strictest."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if HEADER not in response:
            html = response.get("Content-Type", "").startswith("text/html")
            response[HEADER] = page_policy(request) if html else NONE_POLICY
        return response
