from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from catalog.api.serializers import InspectionSerializer
from catalog.models import Backend, CaseTemplate
from core.exceptions import ApplicationError
from core.schemas import component_ref
from studies.choices import TERMINAL_STATES, EndReason, RunState, StudyState
from studies.models import Run, Study, Upload
from studies.provenance import run_provenance
from studies.selectors import run_results_source, study_progress
from studies.spec import spec_validate


@extend_schema_field(component_ref("StudySpec"))
class SpecField(serializers.JSONField):
    """A study spec as the user wrote it (its schema: studies/schemas/study-spec.json)."""


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
    parameters = serializers.DictField(
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
    objectives = serializers.DictField(
        child=serializers.JSONField(),
        help_text="the study's objectives, all of them, as in the study spec: "
        "{name: {series, reduce, n} | {expr}}",
    )
    trust = serializers.DictField(
        child=serializers.JSONField(),
        required=False,
        help_text="the study's trust rules (residuals_below, drift_below, window), as in the "
        "study spec; left out: unchanged",
    )


class StudyCloneSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)


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
    last_seq = serializers.IntegerField(
        source="event_seq", read_only=True, help_text="seq of the study's live stream at read time"
    )
    spec = SpecField(read_only=True, help_text="the spec as the user wrote it")
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
    queue_position = serializers.SerializerMethodField()
    wall_seconds = serializers.FloatField(
        read_only=True, allow_null=True, help_text="from start to end; null until both happened"
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
            "iterations",
            "last_time",
            "cpu_percent",
            "rss_bytes",
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
            # (services.study_cancel_queued): it never starts, so it is cancelled already
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


class ReusedSourceSerializer(serializers.Serializer):
    run = serializers.UUIDField()
    study = serializers.UUIDField()
    study_name = serializers.CharField()
    index = serializers.IntegerField()


class RunLimitsSerializer(serializers.Serializer):
    """What held the run to what it declared (docs/security.md)."""

    cgroup = serializers.BooleanField(
        help_text="the kernel enforced its memory, cores and processes (a cgroup of its own)"
    )
    detail = serializers.CharField(help_text="why not, when not")
    memory_gb = serializers.FloatField(help_text="0: none")
    cpus = serializers.FloatField(help_text="0: none")
    processes = serializers.IntegerField(help_text="0: none")
    disk_gb = serializers.FloatField(help_text="the run directory's budget; 0: none")
    memory_peak_bytes = serializers.IntegerField(
        allow_null=True, help_text="the highest memory the run's cgroup used"
    )


class ProvenanceSerializer(serializers.Serializer):
    """docs/provenance.md: enough to rerun the run's case by hand."""

    identity = serializers.DictField(help_text="{hash, inputs, context}")
    solver = serializers.CharField()
    openfoam_version = serializers.CharField(help_text="as the solver's log banner says it")
    openfoam = serializers.DictField()
    image = serializers.DictField(allow_null=True, help_text="{name, kind, digest, packages}")
    packages = serializers.DictField(child=serializers.CharField(), help_text="name: version")
    backend = serializers.DictField(help_text="{name, kind}")
    hosts = serializers.ListField(child=serializers.CharField())
    agent_host = serializers.CharField()
    job_id = serializers.CharField(help_text="the attempt's id on its backend")
    processes = serializers.IntegerField()
    nodes = serializers.IntegerField()
    decompose = serializers.DictField(allow_null=True)
    commands = serializers.ListField(
        child=serializers.DictField(),
        help_text="each step as the agent ran it: name, role, command, argv, exit_code, "
        "started_at, ended_at",
    )
    planned_commands = serializers.ListField(child=serializers.DictField())
    environment = serializers.DictField(
        help_text="{allowlist: {names, prefixes}, names, set_by_run_configuration}"
    )
    sandbox = serializers.CharField()
    limits = RunLimitsSerializer(allow_null=True, help_text="null: the agent did not say")
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    exit_code = serializers.IntegerField(allow_null=True)
    end_reason = serializers.CharField()
    attempt = serializers.IntegerField()
    agent_version = serializers.CharField()
    portal_version = serializers.CharField()
    case = serializers.DictField(help_text="{template, upload, digest}")
    run = serializers.UUIDField(help_text="the run that computed the results")
    study = serializers.UUIDField()
    study_name = serializers.CharField()
    index = serializers.IntegerField()


class RunDetailSerializer(RunSerializer):
    # a field named `context`: DRF's serializer metaclass takes declared fields out of the
    # class, so it never shadows Serializer.context, which the stubs cannot see
    context = serializers.JSONField(read_only=True)  # type: ignore[assignment]
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

    class Meta(RunSerializer.Meta):
        fields = [
            *RunSerializer.Meta.fields,
            "context",
            "backend_handle",
            "identity",
            "reused_source",
            "provenance",
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

    @extend_schema_field(ProvenanceSerializer)
    def get_provenance(self, obj) -> dict:
        return ProvenanceSerializer(run_provenance(run=self._source(obj))).data


class UploadSerializer(serializers.ModelSerializer):
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


class PreviewSerializer(serializers.Serializer):
    run_count = serializers.IntegerField()
    checked_runs = serializers.IntegerField(
        help_text="how many runs' values (bounds, derived values) the preview checked: "
        "run_count unless the space is too large to check them all here (then the first "
        "ones; submission checks every run)"
    )
    parameters = serializers.ListField(child=serializers.CharField())
    rows = serializers.ListField(child=serializers.DictField())
    solver = serializers.CharField()
    backend = serializers.CharField()
    resources = serializers.DictField()
    steps = serializers.ListField(child=serializers.DictField())
    objectives = serializers.DictField()
    quota = serializers.DictField()


class ResultRowSerializer(serializers.Serializer):
    run = serializers.UUIDField()
    index = serializers.IntegerField()
    parameters = serializers.DictField()
    state = serializers.CharField()
    objectives = serializers.DictField()
    iterations = serializers.IntegerField(allow_null=True)
    wall_seconds = serializers.FloatField(allow_null=True)
    end_reason = serializers.CharField()
    attempts = serializers.IntegerField()
    trust = serializers.CharField()
    reused_from = serializers.UUIDField(
        allow_null=True, help_text="the run whose results this one shows (reused), else null"
    )


class ResultsSerializer(serializers.Serializer):
    study = serializers.UUIDField()
    parameters = serializers.ListField(child=serializers.CharField())
    objectives = serializers.ListField(child=serializers.CharField())
    rows = ResultRowSerializer(many=True)
    last_seq = serializers.IntegerField()


class TelemetrySerializer(serializers.Serializer):
    run = serializers.UUIDField()
    attempt = serializers.IntegerField()
    last_seq = serializers.IntegerField(help_text="apply live events with a higher seq")
    available = serializers.ListField(child=serializers.CharField())
    series = serializers.DictField()


class FieldGridSerializer(serializers.Serializer):
    name = serializers.CharField(
        help_text="domain (the whole plane) or body (around the force patches)"
    )
    x0 = serializers.FloatField()
    y0 = serializers.FloatField()
    dx = serializers.FloatField()
    dy = serializers.FloatField()
    nx = serializers.IntegerField()
    ny = serializers.IntegerField()


class FieldInfoSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="p, mag(U), k, …")
    label = serializers.CharField()  # type: ignore[assignment]  # the API key is "label"
    dimensions = serializers.CharField(help_text="OpenFOAM's [kg m s K mol A cd] exponents")
    min = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)


class FieldPlaneSerializer(serializers.Serializer):
    normal = serializers.CharField()
    at = serializers.FloatField(allow_null=True)
    axes = serializers.ListField(child=serializers.CharField())


class CpReferenceSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="how Cp was made, in words")
    magUInf = serializers.FloatField(allow_null=True)  # noqa: N815 (OpenFOAM's names)
    rhoInf = serializers.FloatField(allow_null=True)  # noqa: N815
    pRef = serializers.FloatField(allow_null=True)  # noqa: N815
    lRef = serializers.FloatField(allow_null=True)  # noqa: N815
    chord = serializers.FloatField(allow_null=True)


class SurfaceCpSerializer(serializers.Serializer):
    patches = serializers.ListField(child=serializers.CharField())
    reference = CpReferenceSerializer()
    x_over_c = serializers.ListField(child=serializers.FloatField(allow_null=True))
    cp = serializers.ListField(child=serializers.FloatField(allow_null=True))
    side = serializers.ListField(child=serializers.ChoiceField(choices=["upper", "lower"]))
    patch = serializers.ListField(child=serializers.CharField())


class RunFieldsSerializer(serializers.Serializer):
    run = serializers.UUIDField()
    available = serializers.BooleanField()
    time = serializers.CharField(required=False)
    kind = serializers.ChoiceField(choices=["2d", "plane"], required=False)
    plane = FieldPlaneSerializer(required=False)
    fields = FieldInfoSerializer(many=True)  # type: ignore[assignment]  # the API key
    regions = FieldGridSerializer(many=True)
    cp = SurfaceCpSerializer(allow_null=True, required=False)
    notes = serializers.ListField(child=serializers.CharField())


class FieldOutlineSerializer(serializers.Serializer):
    x = serializers.ListField(child=serializers.FloatField(allow_null=True))
    y = serializers.ListField(child=serializers.FloatField(allow_null=True))


class RunFieldDataSerializer(serializers.Serializer):
    run = serializers.UUIDField()
    field = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # the API key is "label"
    dimensions = serializers.CharField()
    region = FieldGridSerializer()
    values = serializers.ListField(
        child=serializers.FloatField(allow_null=True), help_text="row by row (y), nx per row"
    )
    min = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)
    outline = FieldOutlineSerializer()


class LogSerializer(serializers.Serializer):
    run = serializers.UUIDField()
    attempt = serializers.IntegerField()
    lines = serializers.ListField(child=serializers.CharField())


@extend_schema_field(component_ref("Scalar"))
class ScalarField(serializers.JSONField):
    """A parameter's or objective's value: a number, a string or a boolean."""


class PlotQuerySerializer(serializers.Serializer):
    """The objective plot's query (studies/plot.py); the axes are checked against the study."""

    x = serializers.CharField(required=False, help_text="param.NAME or objective.NAME (required)")
    y = serializers.CharField(required=False, help_text="param.NAME or objective.NAME (required)")
    color = serializers.CharField(
        required=False, help_text="points and bins: one colour per value of this axis"
    )
    z = serializers.CharField(required=False, help_text="heat map: the value averaged per cell")
    mode = serializers.ChoiceField(choices=["auto", "heatmap"], default="auto")
    max_points = serializers.IntegerField(min_value=1, max_value=20_000, default=5_000)
    bins = serializers.IntegerField(min_value=2, max_value=200, default=50)


class PlotPointsSerializer(serializers.Serializer):
    """Columns: the n-th entry of each list is one run."""

    run = serializers.ListField(child=serializers.UUIDField())
    index = serializers.ListField(child=serializers.IntegerField())
    x = serializers.ListField(child=ScalarField())
    y = serializers.ListField(child=serializers.FloatField())
    color = serializers.ListField(child=ScalarField(allow_null=True))
    state = serializers.ListField(child=serializers.CharField())
    trust = serializers.ListField(child=serializers.CharField())


class PlotBinSerializer(serializers.Serializer):
    x = ScalarField(help_text="the value, or the middle of the range")
    x_low = serializers.FloatField(allow_null=True, help_text="null when x is a value")
    x_high = serializers.FloatField(allow_null=True)
    count = serializers.IntegerField()
    mean = serializers.FloatField()
    min = serializers.FloatField()
    max = serializers.FloatField()


class PlotGroupSerializer(serializers.Serializer):
    color = ScalarField(allow_null=True, help_text="the colour's value or range middle")
    color_low = serializers.FloatField(allow_null=True)
    color_high = serializers.FloatField(allow_null=True)
    bins = PlotBinSerializer(many=True)


class PlotHeatmapSerializer(serializers.Serializer):
    x = serializers.ListField(child=ScalarField(), help_text="the columns: values or middles")
    y = serializers.ListField(child=ScalarField(), help_text="the rows")
    x_edges = serializers.ListField(child=serializers.FloatField(), allow_null=True)
    y_edges = serializers.ListField(child=serializers.FloatField(), allow_null=True)
    mean = serializers.ListField(
        child=serializers.ListField(child=serializers.FloatField(allow_null=True)),
        help_text="mean[row][column] of z; null for an empty cell",
    )
    count = serializers.ListField(child=serializers.ListField(child=serializers.IntegerField()))


class PlotSerializer(serializers.Serializer):
    mode = serializers.CharField(
        help_text="points (every run), binned (a summary per x bin) or heatmap"
    )
    x = serializers.CharField()
    y = serializers.CharField()
    color = serializers.CharField(allow_null=True)
    z = serializers.CharField(allow_null=True)
    total = serializers.IntegerField(help_text="runs plotted (those with the axes' values)")
    last_seq = serializers.IntegerField(help_text="the study stream's seq this answer includes")
    points = PlotPointsSerializer(allow_null=True)
    groups = PlotGroupSerializer(many=True)
    heatmap = PlotHeatmapSerializer(allow_null=True)


class SurrogateProgressSerializer(serializers.Serializer):
    goal = serializers.ChoiceField(choices=["map", "optimise"])
    objectives = serializers.ListField(child=serializers.CharField())
    direction = serializers.CharField(allow_null=True, help_text="optimise: max or min")
    batch = serializers.IntegerField(help_text="batches made so far (the initial design is 1)")
    max_batches = serializers.IntegerField(help_text="the most batches the budget allows")
    runs = serializers.IntegerField(help_text="runs made so far")
    budget = serializers.IntegerField()
    batch_size = serializers.IntegerField()
    initial = serializers.IntegerField()
    tolerance = serializers.FloatField(allow_null=True)
    end = serializers.CharField(help_text="why the batches stopped; empty while they go on")
    end_display = serializers.CharField()


class SurrogateParameterSerializer(serializers.Serializer):
    name = serializers.CharField()
    min = serializers.FloatField()
    max = serializers.FloatField()


class SurrogateValueSerializer(serializers.Serializer):
    mean = serializers.FloatField()
    std = serializers.FloatField()


class SurrogateFieldSerializer(serializers.Serializer):
    mean = serializers.JSONField(help_text="z[y][x] (a list over x when y is null)")
    std = serializers.JSONField(help_text="the standard deviation, shaped as mean")


class SurrogateGridSerializer(serializers.Serializer):
    x = serializers.CharField()
    y = serializers.CharField(allow_null=True)
    xs = serializers.ListField(child=serializers.FloatField())
    ys = serializers.ListField(child=serializers.FloatField())
    fixed = serializers.DictField(
        child=serializers.FloatField(), help_text="the other parameters, at mid-range"
    )
    objectives = serializers.DictField(child=SurrogateFieldSerializer())


class SurrogateSerializer(serializers.Serializer):
    progress = SurrogateProgressSerializer()
    parameters = SurrogateParameterSerializer(many=True)
    grid = SurrogateGridSerializer(
        required=False, allow_null=True, help_text="the map (no parameter given)"
    )
    samples = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="the runs' points with their batch (no parameter given)",
    )
    observed = serializers.DictField(
        child=serializers.IntegerField(),
        required=False,
        help_text="completed runs with a value, per objective",
    )
    at = serializers.DictField(
        child=serializers.FloatField(), required=False, help_text="the point predicted"
    )
    prediction = serializers.DictField(
        child=SurrogateValueSerializer(),
        required=False,
        help_text="per objective: mean and standard deviation at `at`",
    )
    missing = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="objectives with no completed value yet (no prediction)",
    )
