import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("windtunnel")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_finalize.connect
def _beat_schedule(sender: Celery, **_: object) -> None:
    """All periodic tasks, in one place."""
    from django.conf import settings

    tick = settings.CELERY_BEAT_TICK
    sender.conf.beat_schedule = {
        "scheduler-tick": {"task": "scheduler.tick", "schedule": tick},
        "runs-reap": {"task": "studies.reap", "schedule": tick},
        "cloud-limits": {
            "task": "catalog.cloud_limits",
            "schedule": settings.CLOUD_REFRESH_SECONDS,
        },
        "cloud-leaks": {"task": "catalog.reap_leaks", "schedule": settings.CLOUD_REFRESH_SECONDS},
        "stack-events": {"task": "catalog.stack_events", "schedule": tick},
    }


@signals.worker_ready.connect
def _worker_ready(**_: object) -> None:
    from pathlib import Path

    from django.conf import settings

    from catalog.models import Backend
    from core.runtime import tune_gc
    from orchestration.drivers.local import warm_up_launcher

    if Backend.objects.filter(kind="local", enabled=True).exists():
        warm_up_launcher(log_dir=Path(settings.RUNS_DIR))  # the first local run starts at once
    tune_gc()
