"""System checks of the project's own settings (`manage.py check`; `--deploy` for these)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Warning


def secrets_key_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A deployment encrypts stored backend credentials with a key of their own."""
    if settings.WINDTUNNEL.get("SECRETS_KEY"):
        return []
    return [
        Warning(
            "WINDTUNNEL_SECRETS_KEY is not set: stored backend credentials are encrypted with a "
            "key derived from SECRET_KEY, so whoever learns SECRET_KEY can read them, and "
            "rotating SECRET_KEY makes them unreadable.",
            hint="Set WINDTUNNEL_SECRETS_KEY to a Fernet key (python3 -c 'import base64, os; "
            "print(base64.urlsafe_b64encode(os.urandom(32)).decode())'), then run manage.py "
            "reencrypt_secrets (what SECRET_KEY's key encrypted still decrypts until then).",
            id="windtunnel.W001",
        )
    ]
