from django.apps import AppConfig
from django.core.checks import Tags, register

from core.checks import secrets_key_check
from core.metrics import metrics_process_start


class CoreConfig(AppConfig):
    name = "core"

    def ready(self) -> None:
        register(secrets_key_check, Tags.security, deploy=True)
        # every process of the portal (web workers, the Celery worker, beat) counts into the
        # shared metrics directory from a clean start of its own (core.metrics)
        metrics_process_start()
