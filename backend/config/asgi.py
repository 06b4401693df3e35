"""ASGI entry point: HTTP through Django, websockets through Channels."""

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import django
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")


class OneHopASGIHandler(ASGIHandler):
    """Django's ASGI handler with its middleware chain run synchronously in one thread hop.

    Every view here is synchronous. The stock handler runs each middleware in async mode and
    hops into a thread and back for every process_request/process_response (about 15 hops a
    request with our middleware): on the ingest path, that was most of the CPU a request cost.
    """

    IDLE_THREADS = 32  # request threads kept for reuse; more are made while a burst lasts
    # set by load_middleware (Django's BaseHandler; not in its stubs): the request's response,
    # or an awaitable of it once wrapped for async
    _middleware_chain: Callable[[HttpRequest], Any]

    def __init__(self):
        super().__init__()
        self._idle: list[ThreadPoolExecutor] = []

    def load_middleware(self, is_async=False):
        super().load_middleware(is_async=False)
        if is_async:
            self._middleware_chain = sync_to_async(self._middleware_chain, thread_sensitive=True)

    async def __call__(self, scope, receive, send):
        """As Django's, with one thread per request in flight, but a reused one: the stock
        handler starts a thread for every request and joins it afterwards in the event loop
        (about a millisecond of CPU a request, and a stall for every websocket meanwhile)."""
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}")
        executor = self._idle.pop() if self._idle else ThreadPoolExecutor(1, "request")
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            if len(self._idle) < self.IDLE_THREADS:
                self._idle.append(executor)
            else:
                executor.shutdown(wait=False)


django.setup(set_prefix=False)
django_asgi_app = OneHopASGIHandler()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import OriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from config.routing import websocket_urlpatterns  # noqa: E402
from ingest.api.gate import IngestGate  # noqa: E402
from tenancy.authentication import WebsocketAuthMiddleware  # noqa: E402


class BrowserOriginValidator(OriginValidator):
    """Browsers always send Origin: it must be one of ours (no cross-site websocket hijacking
    of a session). Scripts send none and authenticate with a token, so no Origin is allowed."""

    def valid_origin(self, parsed_origin) -> bool:
        return parsed_origin is None or super().valid_origin(parsed_origin)


application = ProtocolTypeRouter(
    {
        # the agents' API: callers authenticated and bodies capped before they are read, the
        # common telemetry batch answered without Django's handler (ingest/api/gate.py)
        "http": IngestGate(django_asgi_app),
        "websocket": BrowserOriginValidator(
            WebsocketAuthMiddleware(URLRouter(websocket_urlpatterns)),
            settings.ALLOWED_HOSTS if "*" not in settings.ALLOWED_HOSTS else ["*"],
        ),
    }
)

from config.startup import web_process_warm_up  # noqa: E402
from core.runtime import tune_gc  # noqa: E402

web_process_warm_up()
tune_gc()  # last: everything imported at start-up is frozen out of the collector's way
