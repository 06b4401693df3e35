from config.env import env

env.ENVIRON.setdefault("SECRET_KEY", "local-development-only-not-secret")
env.ENVIRON.setdefault("DJANGO_DEBUG", "true")

from config.settings.base import *  # noqa: E402,F403
