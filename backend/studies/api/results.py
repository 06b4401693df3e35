"""A study's results table, a run's telemetry, log and field maps, as the API shows them."""

from __future__ import annotations

from rest_framework import serializers

from core.api.fields import SchemaField
from studies.api.serializers import OBJECTIVE_VALUES, SCALARS


class ResultRowSerializer(serializers.Serializer):
    run = serializers.UUIDField()
    index = serializers.IntegerField()
    parameters = SchemaField(SCALARS)
    state = serializers.CharField()
    objectives = SchemaField(
        OBJECTIVE_VALUES,
        help_text="results; null for each objective of a run that did not complete",
    )
    partial_objectives = SchemaField(
        OBJECTIVE_VALUES,
        help_text="a run that did not complete: what its partial series give; not results",
    )
    amplitudes = SchemaField(
        OBJECTIVE_VALUES,
        help_text="an unsteady run: the swing (±) of each oscillating mean_last objective",
    )
    iterations = serializers.IntegerField(allow_null=True)
    wall_seconds = serializers.FloatField(allow_null=True)
    end_reason = serializers.CharField()
    attempts = serializers.IntegerField()
    trust = serializers.CharField()
    reused_from = serializers.UUIDField(
        allow_null=True, help_text="the run whose results this one shows (reused), else null"
    )
    peak_memory_bytes = serializers.IntegerField(
        allow_null=True, help_text="its steps' peak resident memory; null until it ended"
    )
    cpu_seconds = serializers.FloatField(
        allow_null=True, help_text="its steps' CPU time, user + system; null until it ended"
    )
    core_hours = serializers.FloatField(
        allow_null=True,
        help_text="cores held × the wall time of its steps; null: never started",
    )


class ResultsSerializer(serializers.Serializer):
    study = serializers.UUIDField()
    parameters = serializers.ListField(child=serializers.CharField())
    objectives = serializers.ListField(child=serializers.CharField())
    rows = ResultRowSerializer(many=True)
    last_seq = serializers.IntegerField()


class TelemetrySeriesSerializer(serializers.Serializer):
    x = serializers.ListField(child=serializers.FloatField())
    y = serializers.ListField(
        child=serializers.FloatField(allow_null=True),
        help_text="as many as x; null where the solver wrote NaN or Infinity",
    )
    points = serializers.IntegerField(help_text="points the series has")
    returned = serializers.IntegerField(help_text="points returned (after downsampling)")


class TelemetrySerializer(serializers.Serializer):
    run = serializers.UUIDField()
    attempt = serializers.IntegerField()
    last_seq = serializers.IntegerField(help_text="apply live events with a higher seq")
    available = serializers.ListField(child=serializers.CharField())
    series = serializers.DictField(
        child=TelemetrySeriesSerializer(), help_text="the series asked for, by name"
    )
    log = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="with since_seq: the log lines of the live events after it",
    )


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
    preparing = serializers.BooleanField(
        help_text="the fields of a completed run are being made (its page asked for them "
        "first): ask again in a second"
    )
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
