from django.apps import AppConfig
from django.core.checks import Tags, register

from core.checks import secrets_key_check


class CoreConfig(AppConfig):
    name = "core"

    def ready(self) -> None:
        register(secrets_key_check, Tags.security, deploy=True)
