"""A study's Pareto front (studies/front.py), as the API shows it."""

from __future__ import annotations

from rest_framework import serializers

from studies.api.plots import ConstraintSerializer, SurrogateProgressSerializer


class FrontObjectiveSerializer(serializers.Serializer):
    name = serializers.CharField()
    direction = serializers.ChoiceField(choices=["max", "min"], help_text="which way is better")


class FrontRunSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    index = serializers.IntegerField(help_text="the run's index in the study")
    batch = serializers.IntegerField(
        allow_null=True, help_text="an adaptive study's batch it came in (1: the initial design)"
    )
    values = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text="its value of each objective and constrained objective (null: none)",
    )
    feasible = serializers.BooleanField(help_text="it has every value and keeps the constraints")
    front = serializers.BooleanField(help_text="no feasible run is at least as good at everything")


class FrontHistorySerializer(serializers.Serializer):
    batch = serializers.IntegerField()
    runs = serializers.IntegerField(help_text="runs made up to this batch")
    hypervolume_share = serializers.FloatField(help_text="the front's hypervolume then")


class FrontSerializer(serializers.Serializer):
    objectives = FrontObjectiveSerializer(many=True)
    constraints = ConstraintSerializer(many=True)
    completed = serializers.IntegerField(help_text="the study's completed runs")
    missing = serializers.IntegerField(help_text="completed runs without a value of an objective")
    feasible = serializers.IntegerField(help_text="completed runs that keep the constraints")
    front_size = serializers.IntegerField(help_text="runs on the front")
    hypervolume = serializers.FloatField(
        allow_null=True,
        help_text="the front's hypervolume to the reference point, in the "
        "objectives' units (null before a feasible run)",
    )
    hypervolume_share = serializers.FloatField(
        allow_null=True,
        help_text="that hypervolume over the box from the feasible runs' best "
        "values to the reference point (0 to 1)",
    )
    reference = serializers.DictField(
        child=serializers.FloatField(),
        allow_null=True,
        help_text="the reference point: 10 % of the feasible runs' range past their worst value",
    )
    history = FrontHistorySerializer(
        many=True, help_text="an adaptive study's hypervolume after each batch (same reference)"
    )
    progress = SurrogateProgressSerializer(
        allow_null=True, help_text="an adaptive study's batches (null for other studies)"
    )
    runs = FrontRunSerializer(
        many=True,
        help_text="by index: every run on the front, then the latest others, 5,000 at most",
    )
