"""What the preview answers (studies/preview.py, studies/estimate.py): the runs a spec makes,
what they take of the quota, an adaptive study's batches and what the study will cost."""

from __future__ import annotations

from rest_framework import serializers

from core.api.fields import SchemaField
from studies.api.plots import ConstraintSerializer
from studies.api.quota import EstimateSerializer, QuotaAmountsSerializer, ShapeSerializer
from studies.api.serializers import OBJECTIVE_SPECS, SCALARS, EffectiveResourcesSerializer


class PreviewRowSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    parameters = SchemaField(SCALARS)
    context = SchemaField(  # type: ignore[assignment]  # the API key, as on RunDetail
        SCALARS, help_text="parameters plus derived values"
    )


class PreviewStepSerializer(serializers.Serializer):
    name = serializers.CharField()
    argv = serializers.ListField(child=serializers.CharField())
    role = serializers.CharField(help_text="prepare, decompose, solve, reconstruct or other")


class QuotaImpactSerializer(serializers.Serializer):
    """What a study would take of the tenant's quota (studies/preview.py)."""

    per_run = ShapeSerializer()
    total = ShapeSerializer()
    limits = QuotaAmountsSerializer(help_text="the tenant's quota")
    in_use = QuotaAmountsSerializer(
        help_text="what the tenant's runs hold now; storage_gb: what the portal stores for it"
    )
    concurrent_runs = serializers.IntegerField()
    limited_by = serializers.CharField(
        allow_blank=True,
        help_text="what sets concurrent_runs: your quota of 4 cores, backend local's 2 cores, …",
    )
    refused_by = serializers.CharField(
        allow_blank=True,
        help_text="the limit a single run does not fit, when it does not: your quota of 4 "
        "cores, backend local's 2 cores, the OpenStack project of backend os (6 cores); "
        "blank when a run fits",
    )
    waves = serializers.IntegerField(allow_null=True)
    fits = serializers.BooleanField(help_text="a single run fits, with room to store its files")
    storage_full = serializers.BooleanField(
        help_text="the storage quota is used up: a submission is refused (a draft may be saved)"
    )
    problem = serializers.CharField(allow_null=True)
    summary = serializers.CharField()


class PreviewAdaptiveSerializer(serializers.Serializer):
    """An adaptive study's plan: the initial design first, then batches up to the budget."""

    goal = serializers.ChoiceField(choices=["map", "optimise", "pareto"])
    objectives = serializers.ListField(
        child=serializers.CharField(), help_text="the objectives the surrogate learns"
    )
    direction = serializers.CharField(allow_null=True, help_text="optimise: max or min")
    directions = serializers.DictField(
        child=serializers.ChoiceField(choices=["max", "min"]),
        help_text="optimise and pareto: each objective's direction (empty for map)",
    )
    constraints = ConstraintSerializer(
        many=True, help_text="optimise and pareto: the ranges the runs must keep"
    )
    initial = serializers.IntegerField(help_text="runs of the initial design (run_count)")
    batch = serializers.IntegerField(
        help_text="runs per later batch (batch auto: a batch made now, from what can run now)"
    )
    batch_auto = serializers.BooleanField(
        help_text="each batch is sized when it is made, to what the tenant can run at once"
    )
    budget = serializers.IntegerField(help_text="the most runs, the initial design included")
    max_batches = serializers.IntegerField(
        allow_null=True, help_text="the most batches, the initial design included (null: auto)"
    )
    tolerance = serializers.FloatField(allow_null=True)


class PreviewSerializer(serializers.Serializer):
    run_count = serializers.IntegerField()
    checked_runs = serializers.IntegerField(
        help_text="how many runs' values (bounds, derived values) the preview checked: "
        "run_count unless the space is too large to check them all here (then the first "
        "ones; submission checks every run)"
    )
    parameters = serializers.ListField(child=serializers.CharField())
    rows = PreviewRowSerializer(many=True, help_text="the first runs")
    solver = serializers.CharField()
    backend = serializers.CharField()
    resources = EffectiveResourcesSerializer()
    steps = PreviewStepSerializer(many=True, help_text="the commands each run will run")
    objectives = SchemaField(OBJECTIVE_SPECS)
    quota = QuotaImpactSerializer()
    adaptive = PreviewAdaptiveSerializer(
        allow_null=True, help_text="combine: adaptive: the batches that follow the first runs"
    )
    estimate = EstimateSerializer()
