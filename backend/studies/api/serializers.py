from __future__ import annotations

from rest_framework import serializers

from studies.choices import TERMINAL_STATES, Combine
from studies.models import Simulation, Study, Upload
from studies.selectors import study_progress


class StudySpecSerializer(serializers.Serializer):
    """The study spec (docs/study-spec.md). Deep validation happens in the service."""

    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True)
    template = serializers.CharField(required=False, help_text="a template name (or give case)")
    case = serializers.UUIDField(required=False, help_text="an upload id (or give template)")
    solver = serializers.CharField(required=False)
    backend = serializers.CharField(required=False)
    resources = serializers.DictField(required=False, help_text="{processes, nodes, memory_gb}")
    parameters = serializers.DictField(
        required=False, help_text="name → {values|range|linspace|value|min,max}"
    )
    combine = serializers.ChoiceField(choices=Combine.choices, required=False)
    samples = serializers.IntegerField(required=False, min_value=1)
    seed = serializers.IntegerField(required=False)
    derived = serializers.DictField(child=serializers.CharField(), required=False)
    objectives = serializers.DictField(required=False)
    prepare = serializers.ListField(
        child=serializers.ListField(child=serializers.CharField()), required=False
    )

    def to_spec(self) -> dict:
        """The spec as the user wrote it (JSON-safe), without API-only fields."""
        spec = dict(self.initial_data)
        spec.pop("draft", None)
        return spec


class StudyCreateSerializer(StudySpecSerializer):
    draft = serializers.BooleanField(
        required=False, default=False, help_text="save without submitting"
    )


class StudyExtendSerializer(serializers.Serializer):
    parameters = serializers.DictField(
        help_text="new values per parameter, e.g. {aoa: {values: [14, 16]}}"
    )


class StudyCloneSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)


class ProgressSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    percent = serializers.FloatField()
    by_state = serializers.DictField(child=serializers.IntegerField())


class StudySerializer(serializers.ModelSerializer):
    template = serializers.SlugRelatedField(slug_field="name", read_only=True)
    backend = serializers.SlugRelatedField(slug_field="name", read_only=True)
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True)
    case = serializers.UUIDField(source="upload_id", read_only=True)
    progress = serializers.SerializerMethodField()
    resources = serializers.SerializerMethodField()
    last_seq = serializers.IntegerField(
        source="event_seq", read_only=True, help_text="seq of the study's live stream at read time"
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
            "last_seq",
        ]

    def get_progress(self, obj) -> ProgressSerializer:
        return study_progress(obj)

    def get_resources(self, obj) -> dict:
        return {"processes": obj.processes, "nodes": obj.nodes, "memory_gb": obj.memory_gb}


class RunSerializer(serializers.ModelSerializer):
    study = serializers.UUIDField(source="study_id", read_only=True)
    backend = serializers.SlugRelatedField(slug_field="name", read_only=True)
    queue_position = serializers.SerializerMethodField()
    wall_seconds = serializers.FloatField(read_only=True)
    last_seq = serializers.IntegerField(
        source="event_seq", read_only=True, help_text="seq of the run's live stream at read time"
    )
    archive_available = serializers.SerializerMethodField(
        help_text="GET archive/ gives the result archive (archive_bytes is its size once made: "
        "runs whose files the portal reads itself are archived on the first download)"
    )

    class Meta:
        model = Simulation
        fields = [
            "id",
            "study",
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
        ]

    def get_queue_position(self, obj) -> int | None:
        return (self.context.get("positions") or {}).get(str(obj.id))

    def get_archive_available(self, obj) -> bool:
        return bool(obj.archive_path) or (
            obj.state in TERMINAL_STATES and bool(obj.results_dir) and obj.results_at is not None
        )


class RunDetailSerializer(RunSerializer):
    context = serializers.JSONField(read_only=True)
    backend_handle = serializers.CharField(
        source="handle",
        read_only=True,
        help_text="this attempt's id on its backend: a Slurm job id (with its array task), a "
        "server id, a process id; empty before it started",
    )

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "context", "backend_handle"]


class UploadSerializer(serializers.ModelSerializer):
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
            "created_at",
        ]


class UploadCreateSerializer(serializers.Serializer):
    file = serializers.FileField(help_text=".tar.gz, .tgz or .zip of an OpenFOAM case")


class PreviewSerializer(serializers.Serializer):
    run_count = serializers.IntegerField()
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


class LogSerializer(serializers.Serializer):
    run = serializers.UUIDField()
    attempt = serializers.IntegerField()
    lines = serializers.ListField(child=serializers.CharField())
