"""ASGI entry point: HTTP through Django, websockets through Channels."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import OriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from config.routing import websocket_urlpatterns  # noqa: E402
from tenancy.authentication import WebsocketAuthMiddleware  # noqa: E402


class BrowserOriginValidator(OriginValidator):
    """Browsers always send Origin: it must be one of ours (no cross-site websocket hijacking
    of a session). Scripts send none and authenticate with a token, so no Origin is allowed."""

    def valid_origin(self, parsed_origin) -> bool:
        return parsed_origin is None or super().valid_origin(parsed_origin)


application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": BrowserOriginValidator(
            WebsocketAuthMiddleware(URLRouter(websocket_urlpatterns)),
            settings.ALLOWED_HOSTS if "*" not in settings.ALLOWED_HOSTS else ["*"],
        ),
    }
)
