"""The installation's SECRET_KEY: its own, never one that is written down somewhere public.

SECRET_KEY signs sessions, CSRF tokens and password-reset links, and (without
WINDTUNNEL_SECRETS_KEY) derives the key that encrypts stored backend credentials
(core.crypto). scripts/bootstrap makes one per installation (scripts/generate-secrets, into
.data/secrets.env); a deployment sets its own. The settings a portal runs with (local,
production) refuse to start without one or with one of the keys below; only the test settings
use a fixed key.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

# keys this repository has shipped or shown as examples (settings, .env examples, docs), and
# the usual placeholders: anyone can sign a session cookie with them
PUBLIC_SECRET_KEYS = frozenset(
    {
        "local-development-only-not-secret",
        "test-only-not-secret",
        "change-me-to-a-long-random-string",
        "change-me",
        "changeme",
        "secret",
    }
)
TEST_SECRET_KEY = "test-only-not-secret"


def secret_key_problem(key: str) -> str | None:
    """Why `key` must not sign anything here, or None."""
    if not key.strip():
        return "SECRET_KEY is not set"
    if key in PUBLIC_SECRET_KEYS or key.startswith("django-insecure-"):
        return "SECRET_KEY is a publicly known default"
    return None


def require_secret_key(key: str, *, fallbacks: list[str] | tuple[str, ...] = ()) -> None:
    """Refuse to start with a missing or publicly known SECRET_KEY (or a publicly known one
    among SECRET_KEY_FALLBACKS, which still verify signatures), saying how to get one."""
    problem = secret_key_problem(key)
    if problem is None and any(secret_key_problem(k) for k in fallbacks):
        problem = "SECRET_KEY_FALLBACKS holds an empty or publicly known key"
    if problem:
        raise ImproperlyConfigured(
            f"{problem}. Run scripts/bootstrap, which makes this installation's own keys in "
            ".data/secrets.env, or set SECRET_KEY in the environment or .env to a long random "
            "string of your own, e.g. the output of "
            "`python3 -c 'import secrets; print(secrets.token_urlsafe(50))'`."
        )
