from typing import Any

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone

from core.models import PublicIdModel
from studies.choices import (
    ACTIVE_STATES,
    STARTED_STATES,
    AdaptiveEnd,
    EndReason,
    Priority,
    RunState,
    StudyState,
    Trust,
    WaitReason,
)
from studies.figures import core_hours_of


class Upload(PublicIdModel):
    """A user's case archive, validated and extracted under UPLOAD_DIR/<id>/case."""

    tenant = models.ForeignKey("tenancy.Tenant", on_delete=models.CASCADE, related_name="uploads")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True)
    filename = models.CharField(max_length=255)
    size_bytes = models.BigIntegerField()
    unpacked_bytes = models.BigIntegerField(default=0)
    files_count = models.PositiveIntegerField(default=0)
    path = models.CharField(max_length=500)
    placeholders = models.JSONField(default=dict, blank=True)
    has_mesh = models.BooleanField(default=False)
    has_block_mesh_dict = models.BooleanField(default=False)
    inspection = models.JSONField(
        default=dict, blank=True, help_text="what the case will do (orchestration.case.caseinspect)"
    )

    def __str__(self) -> str:
        return self.filename


class Study(PublicIdModel):
    tenant = models.ForeignKey("tenancy.Tenant", on_delete=models.CASCADE, related_name="studies")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    state = models.CharField(max_length=32, choices=StudyState.choices, default=StudyState.DRAFT)
    spec = models.JSONField(help_text="the study spec as the user wrote it (docs/study-spec.md)")
    template = models.ForeignKey(
        "catalog.CaseTemplate", on_delete=models.PROTECT, null=True, blank=True
    )
    upload = models.ForeignKey(Upload, on_delete=models.PROTECT, null=True, blank=True)
    backend = models.ForeignKey("catalog.Backend", on_delete=models.PROTECT)
    image = models.ForeignKey("catalog.Image", on_delete=models.PROTECT, null=True, blank=True)
    solver = models.CharField(max_length=100)
    processes = models.PositiveIntegerField(default=1)
    nodes = models.PositiveIntegerField(default=1)
    memory_gb = models.FloatField(default=1.0)
    objectives = models.JSONField(default=dict, blank=True)
    derived = models.JSONField(default=dict, blank=True)
    constants = models.JSONField(default=dict, blank=True, help_text="template defaults not varied")
    convergence = models.JSONField(
        default=dict, blank=True, help_text="convergence policy (docs/live.md)"
    )
    event_seq = models.BigIntegerField(
        default=0, help_text="last sequence number of the study's stream"
    )
    case_dir = models.CharField(max_length=500, blank=True)
    steps = models.JSONField(default=list, blank=True, help_text="resolved commands of each run")
    decompose = models.JSONField(null=True, blank=True)
    env = models.JSONField(default=dict, blank=True)
    run_count = models.PositiveIntegerField(default=0)
    cost_estimate = models.JSONField(
        null=True,
        blank=True,
        help_text="what it was estimated to cost when it was submitted (studies/estimate.py)",
    )
    delete_total = models.PositiveIntegerField(
        default=0, help_text="runs its deletion removes (while deleting)"
    )
    delete_done = models.PositiveIntegerField(
        default=0, help_text="runs its deletion removed so far (while deleting)"
    )
    submitted_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cloned_from = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True)
    reuse = models.BooleanField(
        default=True, help_text="runs identical to an earlier completed run are reused"
    )
    priority = models.PositiveSmallIntegerField(
        choices=Priority.choices,
        default=Priority.NORMAL,
        help_text="its place in the tenant's queue under the priority and fair_share policies",
    )
    identity_inputs = models.JSONField(
        default=dict,
        blank=True,
        help_text="what every run's identity hashes besides its context (studies.identity)",
    )
    # adaptive studies (combine: adaptive, studies/adaptive.py): how many batches were made
    # (the initial design is the first), the fence of the next one; and why they stopped
    batches = models.PositiveIntegerField(
        default=0, help_text="adaptive studies: batches made so far, the initial design included"
    )
    adaptive_end = models.CharField(
        max_length=20, choices=AdaptiveEnd.choices, default=AdaptiveEnd.NONE, blank=True
    )
    # batch: auto (sized to what can run when made): the first run index of each batch made,
    # the initial design's 0 first; empty for fixed batches, whose bounds are arithmetic
    batch_starts = ArrayField(
        models.PositiveIntegerField(),
        default=list,
        blank=True,
        help_text="adaptive studies with batch auto: each batch's first run index",
    )
    # parameter names runs carry beyond the spec's: only runs of studies extended before
    # extend refused new names (filled by migration 0018); a read never scans the runs for them
    extra_parameter_names = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant", "-created_at"])]
        verbose_name_plural = "studies"

    def __str__(self) -> str:
        return self.name


class Run(PublicIdModel):
    """One run of a study: a point of its parameter space."""

    # A study's runs are written as a set (100,000 in one COPY, one UPDATE to cancel), so
    # every index and check per row is paid 100,000 times: the foreign keys get no index of
    # their own (the composite indexes below start with each of them), and only the study
    # link is checked by the database. tenant and backend are copies of the study's, which
    # the database checks on the study row; Django still cascades and protects them.
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="runs", db_index=False)
    tenant = models.ForeignKey(
        "tenancy.Tenant",
        on_delete=models.CASCADE,
        related_name="runs",
        db_index=False,
        db_constraint=False,
    )
    backend = models.ForeignKey(
        "catalog.Backend",
        on_delete=models.PROTECT,
        related_name="runs",
        db_index=False,
        db_constraint=False,
    )
    index = models.PositiveIntegerField()
    parameters = models.JSONField(help_text="the values of the study's parameters for this run")
    context = models.JSONField(
        help_text="parameters plus derived values, as rendered into the case"
    )
    state = models.CharField(max_length=16, choices=RunState.choices, default=RunState.PENDING)
    attempt = models.PositiveIntegerField(default=0, help_text="fence: the current attempt number")
    processes = models.PositiveIntegerField(default=1)
    nodes = models.PositiveIntegerField(default=1)
    priority = models.PositiveSmallIntegerField(
        choices=Priority.choices, default=Priority.NORMAL, help_text="a copy of its study's"
    )
    memory_gb = models.FloatField(default=1.0)
    wait_reason = models.CharField(
        max_length=20, choices=WaitReason.choices, default=WaitReason.QUEUED, blank=True
    )
    wait_detail = models.CharField(max_length=200, blank=True)
    handle = models.CharField(max_length=200, blank=True)
    token_hash = models.CharField(max_length=64, blank=True)
    phase = models.CharField(max_length=20, blank=True)
    stop_requested = models.BooleanField(default=False)
    stop_reason = models.CharField(
        max_length=20, choices=EndReason.choices, default=EndReason.NONE, blank=True
    )
    trust = models.CharField(
        max_length=20, choices=Trust.choices, default=Trust.UNKNOWN, blank=True
    )
    trust_detail = models.JSONField(default=dict, blank=True)
    event_seq = models.BigIntegerField(
        default=0, help_text="last sequence number of the run's stream"
    )
    batch_seq = models.BigIntegerField(
        default=0,
        help_text="the highest telemetry batch number (batch_seq) the attempt's agent has had "
        "stored: a batch sent again is acknowledged and not stored twice",
    )
    queued_at = models.DateTimeField()
    admitted_at = models.DateTimeField(null=True, blank=True)
    provisioning_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="when a running run gave its cores back before it ended (its solver had "
        "exited and it was archiving results, local and container backends; or its last step "
        "was about to end and the next run waited on the host for it, local backend)",
    )
    exit_code = models.IntegerField(null=True, blank=True)
    end_reason = models.CharField(
        max_length=20, choices=EndReason.choices, default=EndReason.NONE, blank=True
    )
    message = models.TextField(blank=True)
    objectives = models.JSONField(
        default=dict,
        blank=True,
        help_text="its objectives' values, results of a run that completed (null for each "
        "objective of a run that did not: it has no result)",
    )
    partial_objectives = models.JSONField(
        default=dict,
        blank=True,
        help_text="a run that did not complete (cancelled, failed, stopped at a limit): the "
        "values its objectives would read from the partial series it left; never results",
    )
    iterations = models.IntegerField(null=True, blank=True)
    last_time = models.FloatField(null=True, blank=True)
    cpu_percent = models.FloatField(null=True, blank=True)
    rss_bytes = models.BigIntegerField(null=True, blank=True)
    disk_bytes = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="what its current attempt's directory occupies on disk, as its agent last "
        "measured it (heartbeats, telemetry, the final report)",
    )
    peak_memory_bytes = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="the highest resident memory its steps held at once, from its agent's final "
        "report (the process tree's peak: each process's high-water mark, summed)",
    )
    cpu_seconds = models.FloatField(
        null=True,
        blank=True,
        help_text="the CPU time (user + system) its steps used, from its agent's final report",
    )
    archive_path = models.CharField(max_length=500, blank=True)
    archive_bytes = models.BigIntegerField(null=True, blank=True)
    # the attempt's case directory where the portal reads it itself (local backends, a
    # shared filesystem): its archive is built from there on the first download
    results_dir = models.CharField(max_length=500, blank=True)
    # when the agent's final report came in: its files are complete from then on
    results_at = models.DateTimeField(null=True, blank=True)
    dispatch_failures = models.PositiveIntegerField(
        default=0,
        help_text="attempts its backend could not take (unreachable): they do not count "
        "against the retries",
    )
    retry_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="a run its backend could not take waits until then before it is admitted again",
    )
    identity = models.CharField(
        max_length=64,
        blank=True,
        help_text="content hash of what determines its result (studies.identity)",
    )
    reused = models.BooleanField(
        default=False, help_text="not computed: it shares an identical earlier run's results"
    )
    # the run that computed the results a reused run shows (its series, objectives, archive);
    # NULL on a reused run means it holds them itself (its source's study was deleted and
    # handed them over: runs.reuse)
    reused_from = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="reusers",
        db_index=False,
        db_constraint=False,
    )
    provenance = models.JSONField(
        default=dict, blank=True, help_text="what the agent reported of how it ran the attempt"
    )
    writes = models.JSONField(
        default=dict,
        blank=True,
        help_text="{attempt, times}: the times an attempt's case wrote completely, earliest "
        "first (its agent's final report): what a continuation or restart may start from",
    )
    carried_core_hours = models.FloatField(
        default=0.0,
        help_text="core-hours its earlier attempts used before it was continued or restarted "
        "(its start and end times are its current attempt's): counted in its core-hours and "
        "its tenant's usage",
    )
    resume = models.JSONField(
        null=True,
        blank=True,
        help_text="how its current attempt starts from an earlier one's write: {attempt, "
        "time, iterations, settings, required, by, at, iterations_before} "
        "(studies.transitions.continuation); null: from the case's beginning",
    )

    class Meta:
        ordering = ["study", "index"]
        constraints = [models.UniqueConstraint(fields=["study", "index"], name="uniq_run_index")]
        indexes = [
            # a tenant's queue in admission's order (queued_at, study, index): read from its
            # head without sorting, however many runs wait (scheduler.policies, queue positions)
            models.Index(
                fields=["tenant", "state", "queued_at", "study", "index"], name="run_queue"
            ),
            # the queued runs of studies that are not of normal priority, in the order the
            # priority policies read them (scheduler.policies): a study of normal priority
            # (the default) pays nothing for it at submission
            models.Index(
                fields=["tenant", "priority", "queued_at", "study", "index"],
                name="run_queue_prioritised",
                condition=models.Q(state=RunState.PENDING) & ~models.Q(priority=Priority.NORMAL),
            ),
            models.Index(fields=["backend", "state"], name="run_backend_state"),
            # the runs that wait for a full backend, per tenant, oldest first: admission holds
            # what frees up for another tenant's oldest one (scheduler.admission), found by a
            # probe per backend and tenant. Only the waiting runs are in it: it costs a
            # submission nothing
            models.Index(
                fields=["backend", "tenant", "queued_at", "study", "index"],
                name="run_waits_for_backend",
                condition=models.Q(state=RunState.PENDING, wait_reason=WaitReason.BACKEND),
            ),
            # the tenant's active runs, newest first (the dashboard's list, the runs page
            # filtered to active states): a top-N read from the index's head, never a sort of
            # the whole active set. Only active runs are in it; ended ones leave it
            models.Index(
                "tenant",
                models.F("queued_at").desc(),
                "index",
                name="run_active_recent",
                condition=models.Q(state__in=list(ACTIVE_STATES)),
            ),
            # all the tenant's runs, newest first (the runs page unfiltered, or filtered by a
            # column that is not indexed): a top-N read from the head, never a sort of them all
            models.Index("tenant", models.F("queued_at").desc(), "index", name="run_recent"),
            # the runs whose agents the reaper times: only started runs, so a submission's
            # COPY does not index its queued runs here
            models.Index(
                fields=["state", "heartbeat_at"],
                name="run_heartbeat_started",
                condition=models.Q(state__in=list(STARTED_STATES)),
            ),
            # the quota panel's core-hours and storage sums read only the runs that started,
            # or have an archive: never a queued run, so a submission's COPY pays nothing
            models.Index(
                fields=["tenant", "started_at"],
                name="run_started",
                condition=models.Q(started_at__isnull=False),
            ),
            models.Index(
                fields=["tenant"],
                name="run_archived",
                include=["archive_bytes"],
                condition=models.Q(archive_bytes__isnull=False),
            ),
            # the run directories the portal keeps (a results_dir: local, container, Slurm on
            # a shared filesystem), summed into the tenant's storage (studies.usage): only
            # runs that started there and reported a size, read from the index alone
            models.Index(
                fields=["tenant"],
                name="run_stored",
                include=["disk_bytes"],
                condition=models.Q(disk_bytes__isnull=False) & ~models.Q(results_dir=""),
            ),
            models.Index(fields=["study", "state"], name="run_study_state"),
            # a study's runs that started, with what their core-hours are made of: the study
            # page's core-hours read without visiting the runs that never started (a large
            # study's queued runs, or its cancelled ones)
            models.Index(
                fields=["study"],
                name="run_study_started",
                include=["processes", "started_at", "released_at", "finished_at"],
                condition=models.Q(started_at__isnull=False),
            ),
            # a tenant's completed runs by identity: what a submission may reuse (one probe
            # per new run, in one UPDATE: studies.transitions.runs_reuse)
            models.Index(
                fields=["tenant", "identity"],
                name="run_reusable",
                condition=models.Q(state=RunState.COMPLETED) & ~models.Q(identity=""),
            ),
            # the runs that show another run's results (a source's study deleted: runs.reuse)
            models.Index(
                fields=["reused_from"],
                name="run_reused_from",
                condition=models.Q(reused_from__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.study_id}#{self.index}"

    @property
    def results_run_id(self) -> Any:
        """The run whose series, objectives and archive this one shows: its source when it
        was reused, else itself."""
        return self.reused_from_id or self.pk

    @property
    def core_hours(self) -> float | None:
        """Cores held × the wall time of its steps (studies.figures; None: never started)."""
        return core_hours_of(
            processes=self.processes,
            started_at=self.started_at,
            released_at=self.released_at,
            finished_at=self.finished_at,
            now=timezone.now(),
            carried=self.carried_core_hours,
        )

    @property
    def wall_seconds(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None
