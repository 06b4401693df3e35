"""Warm pools of an OpenStack backend (docs/pools.md): a named worker shape, its bounds, its
workers and the autoscaler's decisions. Data and invariants only; the pilot protocol and the
autoscaler live in dispatch (dispatch/pools.py, dispatch/autoscale.py)."""

from __future__ import annotations

import uuid

from django.db import models

from core.models import TimeStamped
from pools.choices import (
    DEFAULT_PLACEMENT,
    LIVE_WORKER_STATES,
    PLACEMENT_CHOICES,
    ScaleAction,
    WorkerState,
)


class Pool(TimeStamped):
    """Workers of one shape on one backend, between `min_workers` and `max_workers`.

    A run of the backend goes to the pool when its study's image is the pool's, it needs one
    node and its processes and memory fit a worker."""

    backend = models.ForeignKey("catalog.Backend", on_delete=models.CASCADE, related_name="pools")
    name = models.SlugField(max_length=64, unique=True)
    flavor = models.CharField(max_length=200, help_text="the cloud's flavor name or id")
    image = models.ForeignKey("catalog.Image", on_delete=models.PROTECT, related_name="pools")
    nodes = models.PositiveIntegerField(default=1, help_text="nodes per worker (1)")
    cores = models.PositiveIntegerField(help_text="the flavor's vCPUs: a worker's cores")
    memory_gb = models.FloatField(help_text="the flavor's RAM")
    min_workers = models.PositiveIntegerField(default=0)
    max_workers = models.PositiveIntegerField(default=1)
    idle_timeout = models.FloatField(default=300.0, help_text="s an idle worker is kept")
    boot_timeout = models.FloatField(default=300.0, help_text="s a worker has to register")
    enabled = models.BooleanField(default=True)
    draining = models.BooleanField(default=False, help_text="being deleted: boots nothing")
    boot_failures = models.PositiveIntegerField(default=0, help_text="failed boots in a row")
    next_boot_at = models.DateTimeField(null=True, blank=True, help_text="backoff after failures")
    placement = models.CharField(
        max_length=32,
        choices=PLACEMENT_CHOICES,
        default=DEFAULT_PLACEMENT,
        help_text="which worker gets which run (orchestration/planning/placement.py)",
    )
    placement_cursor = models.PositiveBigIntegerField(
        default=0, help_text="round_robin: the worker (in id order) the next run goes to"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class PoolWorker(models.Model):
    """One server of a pool and its pilot. Runs it holds carry the handle `worker_handle`."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="workers")
    state = models.CharField(
        max_length=20, choices=WorkerState.choices, default=WorkerState.BOOTING
    )
    server_id = models.CharField(max_length=100, blank=True)
    server_name = models.CharField(max_length=200, blank=True)
    image_ref = models.CharField(max_length=200, blank=True, help_text="what it booted from")
    cores = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    registered_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    idle_since = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=500, blank=True)
    busy_seconds = models.FloatField(default=0.0, help_text="time spent holding runs")
    runs_done = models.PositiveIntegerField(default=0)
    asked_at = models.DateTimeField(null=True, blank=True, help_text="its pilot's last lease")
    free_cores = models.PositiveIntegerField(
        default=0, help_text="free cores at its last lease, less what it leased then"
    )
    cache = models.JSONField(
        default=list,
        blank=True,
        help_text="image and layer digests its local cache holds, as its pilot reports them",
    )

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["pool", "state"])]

    def __str__(self) -> str:
        return f"{self.pool_id}/{self.id}"

    @property
    def live(self) -> bool:
        return self.state in LIVE_WORKER_STATES

    @property
    def handle(self) -> str:
        """The handle of runs this worker holds ("worker:<server>/<worker>")."""
        return worker_handle(server_id=self.server_id, worker_id=self.id)


def worker_handle(*, server_id: str, worker_id: object) -> str:
    """A leased run's handle: its worker's server and the worker (the driver reads the
    server; the portal the worker)."""
    return f"worker:{server_id}/{worker_id}"


class PoolDecision(models.Model):
    """What the autoscaler decided for a pool, and why (shown to admins)."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="decisions")
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    action = models.CharField(max_length=20, choices=ScaleAction.choices)
    count = models.IntegerField(default=0, help_text="workers booted (+) or deleted (-)")
    queue = models.PositiveIntegerField(default=0, help_text="runs waiting for the pool")
    size = models.PositiveIntegerField(default=0, help_text="live workers before the decision")
    reason = models.CharField(max_length=500)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.pool_id} {self.action} {self.count:+d}"
