"""What a run's provenance looks like in the API (docs/provenance.md): the portal's facts and
the agent's record (its parts typed by the agent messages' schema, ingest/schemas)."""

from __future__ import annotations

from rest_framework import serializers

from core.api.fields import SchemaField
from core.schemas import component_ref, map_of


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
        allow_null=True,
        help_text="the highest memory the run's cgroup was charged (its agent and file cache "
        "included; shared libraries another group loaded first not): the run's own peak is "
        "peak_memory_bytes on the run",
    )


class IdentitySerializer(serializers.Serializer):
    hash = serializers.CharField(help_text="content hash of what determines its result")
    inputs = serializers.DictField(
        help_text="the study's part of the identity, as hashed: case digest, solver, steps, "
        "processes, decomposition, environment, convergence, fields, image or packages"
    )
    # a field named `context`: DRF's serializer metaclass takes declared fields out of the
    # class, so it never shadows Serializer.context, which the stubs cannot see
    context = SchemaField(  # type: ignore[assignment]
        map_of(component_ref("Scalar")), help_text="the values it ran with"
    )


class ProvenanceImageSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.CharField()
    digest = serializers.CharField()
    packages = serializers.DictField(child=serializers.CharField(), help_text="name: version")


class NamedBackendSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.CharField()


class PlannedCommandSerializer(serializers.Serializer):
    name = serializers.CharField()
    role = serializers.CharField()
    argv = serializers.ListField(child=serializers.CharField())


class ProvenanceCaseSerializer(serializers.Serializer):
    template = serializers.CharField(allow_null=True, help_text="its case template's name")
    upload = serializers.UUIDField(allow_null=True, help_text="its uploaded case's id")
    digest = serializers.CharField(help_text="content hash of the case's files")


class BlendSerializer(serializers.Serializer):
    # a field named `source` (see studies.api.quota's LimitSourceSerializer)
    source = serializers.CharField(help_text="the second neighbour run")  # type: ignore[assignment]
    source_index = serializers.IntegerField(allow_null=True, help_text="that run's index")
    weight = serializers.FloatField(
        help_text="w of the start first + w × (second − first): between 0 and 1 between the "
        "two, below 0 beyond the first"
    )


class AgentResumeSerializer(serializers.Serializer):
    blend = BlendSerializer(
        allow_null=True,
        help_text="a warm start from two neighbours: the second, and the weight of the blend",
    )
    # a field named `source` (see studies.api.quota's LimitSourceSerializer)
    source = serializers.CharField(  # type: ignore[assignment]
        allow_null=True, help_text="a warm start: the neighbouring run it started from"
    )
    source_index = serializers.IntegerField(allow_null=True, help_text="that run's index")
    mapped = serializers.BooleanField(
        help_text="a warm start from another mesh: its write mapped onto this run's (mapFields)"
    )
    attempt = serializers.IntegerField(help_text="the attempt whose write it started from")
    time = serializers.CharField(help_text="the write's time")
    iterations = serializers.IntegerField(allow_null=True, help_text="time steps added")
    end_time = serializers.FloatField(
        allow_null=True, help_text="where it was to end without added iterations"
    )
    settings = serializers.DictField(
        child=serializers.DictField(child=serializers.CharField()),
        help_text="the settings changed, by file (controlDict, fvSolution, fvSchemes) and "
        "dotted key",
    )


class ProvenanceSerializer(serializers.Serializer):
    """docs/provenance.md: enough to rerun the run's case by hand."""

    identity = SchemaField(IdentitySerializer)
    solver = serializers.CharField()
    openfoam_version = serializers.CharField(help_text="as the solver's log banner says it")
    openfoam = SchemaField(component_ref("OpenFOAMBuild"))
    image = SchemaField(
        ProvenanceImageSerializer,
        allow_null=True,
        help_text="the image it ran in; null: the solver installed on the backend's machines",
    )
    packages = serializers.DictField(child=serializers.CharField(), help_text="name: version")
    backend = SchemaField(NamedBackendSerializer)
    hosts = serializers.ListField(child=serializers.CharField())
    agent_host = serializers.CharField()
    job_id = serializers.CharField(help_text="the attempt's id on its backend")
    processes = serializers.IntegerField()
    nodes = serializers.IntegerField()
    decompose = SchemaField(component_ref("Decomposition"), allow_null=True)
    commands = SchemaField(
        {"type": "array", "items": component_ref("StepRecord")},
        help_text="each step as the agent ran it: name, role, command, argv, exit_code, "
        "started_at, ended_at",
    )
    planned_commands = SchemaField(
        PlannedCommandSerializer(many=True),
        help_text="the steps the portal planned",
    )
    rerun = serializers.ListField(
        child=serializers.CharField(),
        help_text="shell lines that rerun the case by hand from its unpacked archive, in "
        "order: the run configuration's variables exported, then each step as its agent ran "
        "it (as planned, until the agent reported), its output to log.<step>",
    )
    environment = SchemaField(component_ref("StepEnvironment"))
    sandbox = serializers.CharField()
    limits = RunLimitsSerializer(allow_null=True, help_text="null: the agent did not say")
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    exit_code = serializers.IntegerField(allow_null=True)
    end_reason = serializers.CharField()
    attempt = serializers.IntegerField()
    agent_version = serializers.CharField()
    portal_version = serializers.CharField()
    case = SchemaField(ProvenanceCaseSerializer)
    run = serializers.UUIDField(help_text="the run that computed the results")
    study = serializers.UUIDField()
    study_name = serializers.CharField()
    index = serializers.IntegerField()
    resumed_from = AgentResumeSerializer(
        allow_null=True,
        help_text="the attempt started from an earlier attempt's write (continued or "
        "restarted), with what changed; null: from the case's beginning",
    )
