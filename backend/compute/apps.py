from django.apps import AppConfig


class ComputeConfig(AppConfig):
    name = "compute"

    def ready(self) -> None:
        from celery import signals

        from compute.workers import worker_ready

        signals.worker_ready.connect(worker_ready, weak=False)
