"""`make run`: a portal on this machine, with the keys scripts/bootstrap made for it."""

from config.env import env

env.ENVIRON.setdefault("DJANGO_DEBUG", "true")
# webhooks to receivers on this machine or its network (docs/notifications.md)
env.ENVIRON.setdefault("WINDTUNNEL_WEBHOOK_ALLOW_PRIVATE", "true")

from config.keys import require_secret_key  # noqa: E402
from config.settings.base import *  # noqa: E402,F403
from config.settings.base import SECRET_KEY, SECRET_KEY_FALLBACKS, WINDTUNNEL  # noqa: E402

require_secret_key(SECRET_KEY, fallbacks=SECRET_KEY_FALLBACKS)
# Earlier versions of `make run` signed with a fixed, public SECRET_KEY, and encrypted stored
# backend credentials with a key derived from it. Those still decrypt (the old key signs
# nothing) until `manage.py reencrypt_secrets`, which scripts/run runs, moves them to this
# installation's WINDTUNNEL_SECRETS_KEY.
WINDTUNNEL["LEGACY_SECRET_KEYS"] = [
    *WINDTUNNEL["LEGACY_SECRET_KEYS"],
    "local-development-only-not-secret",
]
