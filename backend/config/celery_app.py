import os

from celery import Celery

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
        "scheduler-tick": {"task": "dispatch.tick", "schedule": tick},
        "runs-reap": {"task": "dispatch.reap", "schedule": tick},
        "cloud-limits": {
            "task": "compute.cloud_limits",
            "schedule": settings.CLOUD_REFRESH_SECONDS,
        },
        "cloud-leaks": {"task": "dispatch.reap_leaks", "schedule": settings.CLOUD_REFRESH_SECONDS},
        # warm pools: scale up for admitted runs waiting, down after the idle timeout
        "pool-autoscale": {
            "task": "dispatch.pools_autoscale",
            "schedule": settings.POOL_AUTOSCALE_SECONDS,
        },
        "backend-events": {"task": "dispatch.backend_events", "schedule": tick},
        # webhook deliveries whose retry is due (or whose worker died mid-send)
        "webhook-deliveries": {"task": "notifications.deliver_due", "schedule": tick},
    }
