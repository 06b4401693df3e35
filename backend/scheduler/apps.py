from django.apps import AppConfig

from core import hooks
from core.hooks import Hook


class SchedulerConfig(AppConfig):
    name = "scheduler"

    def ready(self) -> None:
        from scheduler import policies

        hooks.register(Hook.QUEUE_BY_PRIORITY, policies.queue_by_priority)
