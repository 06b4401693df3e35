from django.apps import AppConfig

from core import hooks
from core.hooks import Hook


class RunsConfig(AppConfig):
    name = "runs"

    def ready(self) -> None:
        from runs import reuse

        hooks.register(Hook.STUDY_DELETING, reuse.study_deleting)
