"""A study's sensitivity (studies/sensitivity.py), as the API shows it."""

from __future__ import annotations

from rest_framework import serializers

from studies.api.plots import SurrogateParameterSerializer


def _interval(help_text: str) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.FloatField(), min_length=2, max_length=2, help_text=help_text
    )


class SensitivityIndexSerializer(serializers.Serializer):
    parameter = serializers.CharField()
    first = serializers.FloatField(
        help_text="first-order Sobol index: the share of the objective's variance the "
        "parameter explains alone (0 to 1)"
    )
    first_interval = _interval("its confidence interval [low, high] (the estimator's)")
    total = serializers.FloatField(
        help_text="total Sobol index: its share with every interaction it takes part in "
        "(≥ first; about 0: the parameter can be fixed)"
    )
    total_interval = _interval("its confidence interval [low, high] (the estimator's)")


class SensitivityObjectiveSerializer(serializers.Serializer):
    name = serializers.CharField()
    runs = serializers.IntegerField(help_text="completed runs with a value the surrogate learnt")
    indices = SensitivityIndexSerializer(many=True, help_text="one per parameter, as `parameters`")


class SensitivitySkippedSerializer(serializers.Serializer):
    name = serializers.CharField()
    runs = serializers.IntegerField(help_text="completed runs with a value so far")
    reason = serializers.CharField()


class SensitivitySerializer(serializers.Serializer):
    samples = serializers.IntegerField(help_text="the estimator's base samples")
    confidence = serializers.FloatField(help_text="the intervals' confidence level")
    runs_needed = serializers.IntegerField(
        help_text="completed runs with a value an objective needs before its indices are shown"
    )
    parameters = SurrogateParameterSerializer(
        many=True, help_text="the parameters the study varies, over the ranges it varies them"
    )
    objectives = SensitivityObjectiveSerializer(many=True)
    skipped = SensitivitySkippedSerializer(
        many=True, help_text="objectives without enough runs yet"
    )
