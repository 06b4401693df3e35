from django.db import models

from orchestration.planning.placement import POLICIES


class WorkerState(models.TextChoices):
    BOOTING = "booting", "Booting"  # server created, its pilot has not registered yet
    IDLE = "idle", "Idle"  # registered, holds no run
    BUSY = "busy", "Busy"  # holds one run or more
    DRAINING = "draining", "Draining"  # takes no new run; deleted once its runs end
    DELETED = "deleted", "Deleted"  # scaled down: its server deleted
    LOST = "lost", "Lost"  # stopped heartbeating: its runs requeued, its server deleted
    FAILED = "failed", "Failed boot"  # never registered within the boot timeout


LIVE_WORKER_STATES = (
    WorkerState.BOOTING,
    WorkerState.IDLE,
    WorkerState.BUSY,
    WorkerState.DRAINING,
)
REGISTERED_STATES = (WorkerState.IDLE, WorkerState.BUSY, WorkerState.DRAINING)


class ScaleAction(models.TextChoices):
    UP = "up", "Scaled up"
    DOWN = "down", "Scaled down"
    HOLD = "hold", "Held"  # runs wait but no worker may boot (max, limits, backoff)
    LOST = "lost", "Worker lost"
    BOOT_FAILED = "boot_failed", "Boot failed"
    DRAIN = "drain", "Draining"


# placement policies (orchestration/planning/placement.py, docs/pools.md): which worker gets which run
PLACEMENT_CHOICES = [(name, name.replace("_", " ")) for name in POLICIES]
DEFAULT_PLACEMENT = "least_loaded"
