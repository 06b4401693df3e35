from django.apps import AppConfig

from core import hooks
from core.hooks import Hook


class TelemetryConfig(AppConfig):
    name = "telemetry"

    def ready(self) -> None:
        from telemetry import run_results

        hooks.register(Hook.RUN_RESULTS_RECOMPUTE, run_results.results_compute)
