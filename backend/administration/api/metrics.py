"""`/metrics` for Prometheus (docs/metrics.md): an operator endpoint, outside the REST API.

It answers only a request carrying the configured scrape token (`Authorization: Bearer …`,
`WINDTUNNEL_METRICS_TOKEN`); without a configured token it is off (404, saying how to turn
it on). Errors are JSON like the API's (`{code, message, field, details}`).
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe
from prometheus_client.exposition import choose_encoder

from administration.metrics import metrics_registry
from core.exceptions import ErrorCode


def error(status: int, code: ErrorCode, message: str) -> JsonResponse:
    """An error in the API's shape."""
    return JsonResponse(
        {"code": code, "message": message, "field": None, "details": None}, status=status
    )


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    """The portal's metrics in Prometheus' text format (OpenMetrics when asked for)."""
    token = settings.WINDTUNNEL["METRICS_TOKEN"]
    if not token:
        return error(
            404,
            ErrorCode.NOT_FOUND,
            "metrics are off: set WINDTUNNEL_METRICS_TOKEN to a secret of your choice and "
            "scrape with 'Authorization: Bearer <token>' (docs/metrics.md)",
        )
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        response = error(
            401,
            ErrorCode.UNAUTHENTICATED,
            "send the scrape token as 'Authorization: Bearer <WINDTUNNEL_METRICS_TOKEN>'",
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        return error(403, ErrorCode.FORBIDDEN, "wrong scrape token")
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    scraped = HttpResponse(encoder(metrics_registry()), content_type=content_type)
    scraped["Cache-Control"] = "no-store"
    return scraped
