"""A deployment behind TLS. `DJANGO_SETTINGS_MODULE=config.settings.production manage.py check
--deploy` passes with what a deployment sets anyway: SECRET_KEY (50+ random characters),
WINDTUNNEL_SECRETS_KEY, ALLOWED_HOSTS, DATABASE_URL and REDIS_URL (.env.example)."""

from config.keys import require_secret_key
from config.settings.base import *  # noqa: F403
from config.settings.base import SECRET_KEY, SECRET_KEY_FALLBACKS, WINDTUNNEL, env

require_secret_key(SECRET_KEY, fallbacks=SECRET_KEY_FALLBACKS)

DEBUG = False
# the TLS-terminating proxy says which scheme the client used
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=True)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=True)
# HTTP is redirected to HTTPS, and browsers are told to use nothing else for a year (HSTS is
# only sent over HTTPS, so a site still on plain HTTP is not locked out by it). A trial on
# plain HTTP (docker/compose.yaml) sets SECURE_SSL_REDIRECT=false and SECURE_HSTS_SECONDS=0.
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=365 * 24 * 3600)
# subdomains of the portal's own host name only (not of its parent domain)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=True)
# Not redirected: health checks of the load balancer, Prometheus' scrapes, and the agents'
# reports where the portal's agent URL is plain HTTP (a private network the operator chose;
# redirecting the agents' POSTs would fail every run).
SECURE_REDIRECT_EXEMPT = env.list(
    "SECURE_REDIRECT_EXEMPT",
    default=[
        r"^healthz$",
        # Prometheus on the private network: a redirect would not protect the token anyway
        # (the first request carried it)
        r"^metrics$",
        *([r"^api/v1/ingest/"] if WINDTUNNEL["PUBLIC_URL"].startswith("http://") else []),
    ],
)
