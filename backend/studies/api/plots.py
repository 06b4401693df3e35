"""The objective plot (studies/plot.py) and an adaptive study's surrogate (studies/surrogate
.py), as the API shows them."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api.fields import SchemaField
from core.schemas import component_ref

_NUMBERS = {"type": "array", "items": {"type": "number"}}
# a map over one parameter (a list over x) or two (rows over y of lists over x)
_MAP = {"oneOf": [{"type": "array", "items": _NUMBERS}, _NUMBERS]}


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
    mode = serializers.ChoiceField(
        choices=["points", "binned", "heatmap"],
        help_text="points (every run), binned (a summary per x bin) or heatmap",
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


class ConstraintSerializer(serializers.Serializer):
    objective = serializers.CharField()
    min = serializers.FloatField(allow_null=True, help_text="the lowest value allowed (null: none)")
    max = serializers.FloatField(
        allow_null=True, help_text="the highest value allowed (null: none)"
    )


class SurrogateProgressSerializer(serializers.Serializer):
    goal = serializers.ChoiceField(choices=["map", "optimise", "pareto"])
    objectives = serializers.ListField(child=serializers.CharField())
    direction = serializers.CharField(allow_null=True, help_text="optimise: max or min")
    directions = serializers.DictField(
        child=serializers.ChoiceField(choices=["max", "min"]),
        help_text="optimise and pareto: each objective's direction (empty for map)",
    )
    constraints = ConstraintSerializer(
        many=True, help_text="optimise and pareto: the ranges the runs must keep"
    )
    batch = serializers.IntegerField(help_text="batches made so far (the initial design is 1)")
    max_batches = serializers.IntegerField(
        allow_null=True, help_text="the most batches the budget allows (null: batch auto)"
    )
    runs = serializers.IntegerField(help_text="runs made so far")
    budget = serializers.IntegerField()
    batch_size = serializers.IntegerField(
        allow_null=True, help_text="runs per batch (null: batch auto, sized when each is made)"
    )
    initial = serializers.IntegerField()
    tolerance = serializers.FloatField(allow_null=True)
    end = serializers.CharField(help_text="why the batches stopped; empty while they go on")
    end_display = serializers.CharField()


class SurrogateParameterSerializer(serializers.Serializer):
    name = serializers.CharField()
    min = serializers.FloatField()
    max = serializers.FloatField()
    unit = serializers.CharField(allow_blank=True, help_text="its template's unit, e.g. m/s")


class SurrogateValueSerializer(serializers.Serializer):
    mean = serializers.FloatField()
    std = serializers.FloatField()


class SurrogateFieldSerializer(serializers.Serializer):
    mean = SchemaField(_MAP, help_text="z[y][x] (a list over x when y is null)")
    std = SchemaField(_MAP, help_text="the standard deviation, shaped as mean")


class SurrogateBestSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="the run's index in the study")
    objective = serializers.CharField(
        help_text="the objective it is the best run of (grid.objective)"
    )
    direction = serializers.ChoiceField(
        choices=["max", "min"], help_text="best: highest (max) or lowest (min); optimise's own"
    )
    value = serializers.FloatField(help_text="its value of the objective")


class SurrogateGridSerializer(serializers.Serializer):
    x = serializers.CharField()
    y = serializers.CharField(allow_null=True)
    xs = serializers.ListField(child=serializers.FloatField())
    ys = serializers.ListField(child=serializers.FloatField())
    fixed = serializers.DictField(
        child=serializers.FloatField(),
        help_text="the other parameters: at the best run's values (fixed_from), else mid-range",
    )
    fixed_from = SurrogateBestSerializer(
        allow_null=True,
        help_text="the run whose values `fixed` holds; null with no other parameter or "
        "before any run has a value (then mid-range)",
    )
    objectives = serializers.DictField(
        child=SurrogateFieldSerializer(),
        help_text="per objective with at least `needs` completed values",
    )


class SurrogateSerializer(serializers.Serializer):
    progress = SurrogateProgressSerializer()
    parameters = SurrogateParameterSerializer(many=True)
    grid = SurrogateGridSerializer(
        required=False, allow_null=True, help_text="the map (no parameter given)"
    )
    samples = SchemaField(
        {
            "type": "array",
            "items": {
                "type": "object",
                "description": "a run's values by parameter name, and its batch",
                "required": ["batch"],
                "properties": {"batch": {"type": "integer"}},
                "additionalProperties": {"type": "number"},
            },
        },
        required=False,
        help_text="the runs' points with their batch (no parameter given)",
    )
    values = serializers.DictField(
        child=serializers.ListField(child=serializers.FloatField(allow_null=True)),
        required=False,
        help_text="per objective, each sample's value (null: not completed, or no value)",
    )
    observed = serializers.DictField(
        child=serializers.IntegerField(),
        required=False,
        help_text="completed runs with a value, per objective",
    )
    needs = serializers.IntegerField(
        required=False, help_text="completed values an objective's map is drawn from"
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
