from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from catalog.api.serializers import PLACEHOLDERS, InspectionSerializer
from catalog.models import Backend, CaseTemplate
from core.api.fields import SchemaField
from core.exceptions import ApplicationError
from core.schemas import component_ref, map_of
from studies.api.continuation import ContinuationSerializer, continuation_of
from studies.api.provenance import ProvenanceSerializer, ReusedSourceSerializer
from studies.api.quota import EstimateSerializer
from studies.choices import TERMINAL_STATES, EndReason, RunState, StudyState
from studies.models import Run, Study, Upload
from studies.provenance import run_provenance
from studies.selectors import run_results_source, study_core_hours, study_progress
from studies.spec import spec_validate


@extend_schema_field(component_ref("StudySpec"))
class SpecField(serializers.JSONField):
    """A study spec as the user wrote it (its schema: studies/schemas/study-spec.json)."""


# the shapes of the spec's parts (studies/schemas/study-spec.json) the API shows elsewhere
SCALARS = map_of(component_ref("Scalar"))  # a run's values by parameter name
OBJECTIVE_VALUES = map_of({"type": ["number", "null"]})  # null: not computed
OBJECTIVE_SPECS = map_of(component_ref("ObjectiveSpec"))


def spec_of(data: Any) -> dict[str, Any]:
    """The spec in a request body: validated by the spec's schema (a 400 naming the field);
    `draft`, the one key of the create request beside the spec, left out."""
    if isinstance(data, dict) and "draft" in data:
        data = {k: v for k, v in data.items() if k != "draft"}
    spec_validate(data)
    return dict(data)


def draft_of(data: Any) -> bool:
    """`draft: true` in a create request: save without submitting."""
    draft = data.get("draft", False) if isinstance(data, dict) else False
    if not isinstance(draft, bool):
        raise ApplicationError(f"draft must be true or false, got {draft!r}", field="draft")
    return draft


# the request bodies: the spec (and, to create, `draft`), by their schema's components
SPEC_REQUEST = {"application/json": component_ref("StudySpec")}
CREATE_REQUEST = {
    "application/json": {
        "allOf": [
            component_ref("StudySpec"),
            {
                "type": "object",
                "properties": {
                    "draft": {
                        "type": "boolean",
                        "default": False,
                        "description": "save without submitting",
                    }
                },
            },
        ]
    }
}


class StudyExtendSerializer(serializers.Serializer):
    parameters = SchemaField(
        map_of(component_ref("ParameterSpec")),
        required=False,
        help_text="new values per parameter, e.g. {aoa: {values: [14, 16]}}",
    )
    budget = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text="an adaptive study's new budget of runs (above its current one): its "
        "batches go on",
    )


class StudyObjectivesSerializer(serializers.Serializer):
    objectives = SchemaField(
        OBJECTIVE_SPECS,
        help_text="the study's objectives, all of them, as in the study spec: "
        "{name: {series, reduce, n} | {expr}}",
    )
    trust = SchemaField(
        component_ref("TrustRules"),
        required=False,
        help_text="the study's trust rules (residuals_below, drift_below, window), as in the "
        "study spec; left out: unchanged",
    )


class StudyCloneSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)


class StudyDeletionSerializer(serializers.Serializer):
    """A study being deleted: its runs removed so far of those it had."""

    id = serializers.UUIDField()
    name = serializers.CharField()
    runs_total = serializers.IntegerField(source="delete_total")
    runs_deleted = serializers.IntegerField(source="delete_done")


class ProgressSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    done = serializers.IntegerField(
        help_text="runs that ended: completed, failed or cancelled (not all succeeded)"
    )
    percent = serializers.FloatField(help_text="share of the runs that ended, in %")
    completed = serializers.IntegerField(help_text="runs that ended with a result")
    failed = serializers.IntegerField()
    cancelled = serializers.IntegerField()
    active = serializers.IntegerField(help_text="runs queued, admitted, starting or running")
    by_state = serializers.DictField(child=serializers.IntegerField())
    cancelling = serializers.IntegerField(
        help_text="of the cancelled, the queued runs a study's cancel is still ending in the "
        "background (none of them starts); 0 once it is done"
    )


class EffectiveResourcesSerializer(serializers.Serializer):
    """A study's resources per run: the spec's, else the template's, else 1."""

    processes = serializers.IntegerField()
    nodes = serializers.IntegerField()
    memory_gb = serializers.FloatField()


class OscillationSerializer(serializers.Serializer):
    """How a mean_last objective's averaged window swings (telemetry.convergence)."""

    mean = serializers.FloatField(help_text="the window's mean (the objective's value)")
    amplitude = serializers.FloatField(help_text="half the window's peak-to-peak")
    relative = serializers.FloatField(
        help_text="amplitude / max(|mean|, the trust rules' oscillation_floor)"
    )
    window = serializers.IntegerField(help_text="points measured")
    oscillating = serializers.BooleanField(
        help_text="it swings back and forth beyond the trust rules' oscillation_below"
    )


class TrustDetailSerializer(serializers.Serializer):
    """The evidence behind a run's trust flag (telemetry.convergence.trust_of); {} until
    the run ended."""

    basis = serializers.ChoiceField(
        choices=[
            "diverged",
            "ended",
            "solver",
            "study_rule",
            "trust_rule",
            "wall_time_limit",
            "iteration_limit",
            "oscillation",
        ],
        required=False,
        help_text="who said so: the solver's tolerance, the study's rules, …",
    )
    why = serializers.CharField(required=False, help_text="in words")
    final_residuals = SchemaField(map_of({"type": ["number", "null"]}), required=False)
    objective_drift = SchemaField(
        map_of({"type": ["number", "null"]}),
        required=False,
        help_text="each objective's relative change over the trust window",
    )
    iterations = serializers.IntegerField(allow_null=True, required=False)
    solver_converged = serializers.BooleanField(required=False)
    objective_errors = serializers.DictField(
        child=serializers.CharField(),
        required=False,
        help_text="objectives that could not be computed, and why",
    )
    oscillation = serializers.DictField(
        child=OscillationSerializer(),
        required=False,
        help_text="each mean_last objective's swing over its averaged window",
    )
    steady_trust = serializers.CharField(
        required=False,
        help_text="an unsteady run: the flag it would have had, its swing aside",
    )


class StudySerializer(serializers.ModelSerializer):
    template: serializers.SlugRelatedField[CaseTemplate] = serializers.SlugRelatedField(
        slug_field="name",
        read_only=True,
        allow_null=True,
        help_text="the case template's name; null for a study of an uploaded case",
    )
    backend: serializers.SlugRelatedField[Backend] = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )
    owner: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )
    case = serializers.UUIDField(
        source="upload_id",
        read_only=True,
        allow_null=True,
        help_text="the uploaded case's id; null for a study of a template",
    )
    progress = serializers.SerializerMethodField()
    resources = serializers.SerializerMethodField()
    core_hours = serializers.SerializerMethodField(
        help_text="core-hours its runs held: each run's cores × the wall time of its steps "
        "(from its start until its cores went back or it ended; up to now while it runs)"
    )
    estimate = EstimateSerializer(
        source="cost_estimate",
        read_only=True,
        allow_null=True,
        help_text="what the preview estimated it would cost when it was submitted; null before",
    )
    last_seq = serializers.IntegerField(
        source="event_seq", read_only=True, help_text="seq of the study's live stream at read time"
    )
    spec = SpecField(read_only=True, help_text="the spec as the user wrote it")
    objectives = SchemaField(
        OBJECTIVE_SPECS, read_only=True, help_text="the study's objectives, as resolved"
    )
    convergence = SchemaField(
        component_ref("ConvergencePolicy"),
        read_only=True,
        help_text="its convergence policy (docs/live.md); {} when it has none",
    )
    priority = serializers.ChoiceField(
        choices=["low", "normal", "high"],
        source="get_priority_display",
        read_only=True,
        help_text="its place in the tenant's queue (priority and fair_share backends)",
    )

    class Meta:
        model = Study
        fields = [
            "id",
            "name",
            "description",
            "state",
            "template",
            "case",
            "solver",
            "backend",
            "resources",
            "objectives",
            "run_count",
            "progress",
            "core_hours",
            "estimate",
            "spec",
            "owner",
            "created_at",
            "submitted_at",
            "finished_at",
            "cloned_from",
            "convergence",
            "priority",
            "last_seq",
        ]

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, obj) -> dict[str, Any]:
        return study_progress(obj)

    def get_core_hours(self, obj) -> float:
        return study_core_hours(obj)

    @extend_schema_field(EffectiveResourcesSerializer)
    def get_resources(self, obj) -> dict:
        return {"processes": obj.processes, "nodes": obj.nodes, "memory_gb": obj.memory_gb}


class RunSerializer(serializers.ModelSerializer):
    study = serializers.UUIDField(source="study_id", read_only=True)
    study_name = serializers.CharField(
        source="study.name", read_only=True, help_text="its study's name (for lists across studies)"
    )
    backend: serializers.SlugRelatedField[Backend] = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )
    parameters = SchemaField(
        SCALARS, read_only=True, help_text="the values of the study's parameters for this run"
    )
    objectives = SchemaField(
        OBJECTIVE_VALUES,
        read_only=True,
        help_text="its objectives' values, results of a run that completed; null: not "
        "computed, or the run did not complete (it has no result)",
    )
    partial_objectives = SchemaField(
        OBJECTIVE_VALUES,
        read_only=True,
        help_text="a run that did not complete (cancelled, failed, stopped at a limit): what "
        "its objectives read from the partial series it left; not results ({} for a run "
        "that completed)",
    )
    trust_detail = SchemaField(TrustDetailSerializer, read_only=True)
    queue_position = serializers.SerializerMethodField()
    wall_seconds = serializers.FloatField(
        read_only=True, allow_null=True, help_text="from start to end; null until both happened"
    )
    core_hours = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="cores held × the wall time of its steps (from its start until its cores "
        "went back or it ended; up to now while it runs); null: never started",
    )
    peak_memory_bytes = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="the highest resident memory its steps held at once (the process tree's "
        "peak), from its agent's final report; null until it ended",
    )
    cpu_seconds = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="the CPU time (user + system) its steps used, from its agent's final "
        "report; null until it ended",
    )
    last_seq = serializers.IntegerField(
        source="event_seq", read_only=True, help_text="seq of the run's live stream at read time"
    )
    archive_available = serializers.SerializerMethodField(
        help_text="GET archive/ gives the result archive (archive_bytes is its size once made: "
        "runs whose files the portal reads itself are archived on the first download)"
    )
    reused = serializers.BooleanField(
        read_only=True,
        help_text="not computed: identical to an earlier completed run, whose results it "
        "shows (docs/reuse.md)",
    )
    reused_from = serializers.UUIDField(
        source="reused_from_id",
        read_only=True,
        allow_null=True,
        help_text="the run whose results a reused run shows; null when it holds them itself",
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "study",
            "study_name",
            "index",
            "parameters",
            "state",
            "attempt",
            "backend",
            "processes",
            "nodes",
            "memory_gb",
            "wait_reason",
            "wait_detail",
            "queue_position",
            "phase",
            "queued_at",
            "admitted_at",
            "started_at",
            "heartbeat_at",
            "finished_at",
            "wall_seconds",
            "exit_code",
            "end_reason",
            "message",
            "objectives",
            "partial_objectives",
            "iterations",
            "last_time",
            "cpu_percent",
            "rss_bytes",
            "peak_memory_bytes",
            "cpu_seconds",
            "core_hours",
            "archive_bytes",
            "archive_available",
            "trust",
            "trust_detail",
            "stop_reason",
            "last_seq",
            "reused",
            "reused_from",
        ]

    def get_queue_position(self, obj) -> int | None:
        return (self.context.get("positions") or {}).get(str(obj.id))

    def to_representation(self, instance):
        data = super().to_representation(instance)
        if instance.state == RunState.PENDING and instance.study.state == StudyState.CANCELLED:
            # a cancelled study's queued run, not yet ended by the cancel's background half
            # (state.study_cancel_queued): it never starts, so it is cancelled already
            data.update(
                state=RunState.CANCELLED.value,
                wait_reason="",
                wait_detail="",
                queue_position=None,
                end_reason=EndReason.CANCELLED_BY_USER.value,
                message="cancelled with its study",
                finished_at=data["finished_at"]
                or serializers.DateTimeField().to_representation(instance.study.finished_at),
            )
        return data

    def get_archive_available(self, obj) -> bool:
        if obj.reused_from_id:  # the source's archive (run.archive follows the pointer)
            return obj.state == "completed"
        return bool(obj.archive_path) or (
            obj.state in TERMINAL_STATES and bool(obj.results_dir) and obj.results_at is not None
        )


class RunDetailSerializer(RunSerializer):
    # a field named `context`: DRF's serializer metaclass takes declared fields out of the
    # class, so it never shadows Serializer.context, which the stubs cannot see
    context = SchemaField(  # type: ignore[assignment]
        SCALARS,
        read_only=True,
        help_text="its parameters plus the derived values, as rendered into the case",
    )
    backend_handle = serializers.CharField(
        source="handle",
        read_only=True,
        help_text="this attempt's id on its backend: a Slurm job id (with its array task), a "
        "server id, a process id; empty before it started",
    )

    identity = serializers.CharField(
        read_only=True, help_text="content hash of what determines its result (docs/reuse.md)"
    )
    reused_source = serializers.SerializerMethodField()
    provenance = serializers.SerializerMethodField()
    continuation = serializers.SerializerMethodField()

    class Meta(RunSerializer.Meta):
        fields = [
            *RunSerializer.Meta.fields,
            "context",
            "backend_handle",
            "identity",
            "reused_source",
            "provenance",
            "continuation",
        ]

    def _source(self, obj) -> Run:
        # a cache per serializer (`self.context` is the run's context field here, for mypy)
        cache: dict[Any, Run] = self.__dict__.setdefault("_sources", {})
        if obj.pk not in cache:
            cache[obj.pk] = run_results_source(run=obj)
        return cache[obj.pk]

    @extend_schema_field(ReusedSourceSerializer(allow_null=True))
    def get_reused_source(self, obj) -> dict | None:
        source = self._source(obj)
        if source.pk == obj.pk:
            return None
        return {
            "run": source.pk,
            "study": source.study_id,
            "study_name": source.study.name,
            "index": source.index,
        }

    @extend_schema_field(ContinuationSerializer)
    def get_continuation(self, obj) -> dict:
        """What the run may go on from (continue, restart), and what it went on from."""
        return continuation_of(obj)

    @extend_schema_field(ProvenanceSerializer)
    def get_provenance(self, obj) -> dict:
        return ProvenanceSerializer(run_provenance(run=self._source(obj))).data


class UploadSerializer(serializers.ModelSerializer):
    placeholders = SchemaField(
        PLACEHOLDERS,
        read_only=True,
        help_text="its files with {{ placeholders }}: the names each uses",
    )
    inspection = serializers.SerializerMethodField()

    class Meta:
        model = Upload
        fields = [
            "id",
            "filename",
            "size_bytes",
            "unpacked_bytes",
            "files_count",
            "placeholders",
            "has_mesh",
            "has_block_mesh_dict",
            "inspection",
            "created_at",
        ]

    @extend_schema_field(InspectionSerializer(allow_null=True))
    def get_inspection(self, obj) -> dict | None:
        return obj.inspection or None


class UploadCreateSerializer(serializers.Serializer):
    file = serializers.FileField(help_text=".tar.gz, .tgz or .zip of an OpenFOAM case")
