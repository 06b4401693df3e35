from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from catalog.inspection import template_inspection
from catalog.models import Backend, CaseTemplate, Package


class InspectedFunctionObjectSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="as in controlDict's functions (an #includeFunc's call)")
    type = serializers.CharField()
    series = serializers.ListField(
        child=serializers.CharField(), help_text="the series it writes, as runs record them"
    )
    open_prefix = serializers.CharField(
        allow_null=True,
        help_text="its columns are not known before a run: any series under this prefix",
    )
    note = serializers.CharField(allow_blank=True)


class InspectedPlaceholderSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.ChoiceField(choices=["number", "integer", "text", "vector"])
    line = serializers.IntegerField()


class InspectionSerializer(serializers.Serializer):
    """What a case will do, read from its files (docs/api.md, "Case inspection")."""

    solver = serializers.CharField(allow_null=True, help_text="controlDict's application")
    series = serializers.ListField(
        child=serializers.CharField(),
        help_text="every series a run will send: function objects' columns, then residuals",
    )
    open_prefixes = serializers.ListField(child=serializers.CharField())
    residuals = serializers.ListField(child=serializers.CharField())
    function_objects = InspectedFunctionObjectSerializer(many=True)
    placeholders = serializers.DictField(
        child=InspectedPlaceholderSerializer(many=True), help_text="by file"
    )
    mesh_steps = serializers.ListField(child=serializers.CharField())
    has_mesh = serializers.BooleanField()
    # a declared field: DRF's metaclass takes it out of the class, Serializer.errors stays
    errors = serializers.ListField(  # type: ignore[assignment]
        child=serializers.CharField(), help_text="what could not be read, naming file and line"
    )
    notes = serializers.ListField(child=serializers.CharField())


class TemplateSerializer(serializers.ModelSerializer):
    parameters = serializers.SerializerMethodField()
    derived = serializers.SerializerMethodField()
    objectives = serializers.SerializerMethodField()
    resources = serializers.SerializerMethodField()
    solvers = serializers.SerializerMethodField()
    demo = serializers.SerializerMethodField()
    inspection = serializers.SerializerMethodField()

    class Meta:
        model = CaseTemplate
        fields = [
            "name",
            "title",
            "description",
            "solver",
            "solvers",
            "resources",
            "parameters",
            "derived",
            "objectives",
            "placeholders",
            "demo",
            "inspection",
        ]

    def get_parameters(self, obj) -> dict:
        return obj.spec.get("parameters") or {}

    def get_derived(self, obj) -> dict:
        return obj.spec.get("derived") or {}

    def get_objectives(self, obj) -> dict:
        return obj.spec.get("objectives") or {}

    def get_resources(self, obj) -> dict:
        return obj.spec.get("resources") or {}

    def get_solvers(self, obj) -> list[str]:
        return list(obj.spec.get("solvers") or [obj.solver])

    def get_demo(self, obj) -> dict:
        return obj.spec.get("demo") or {}

    @extend_schema_field(InspectionSerializer(allow_null=True))
    def get_inspection(self, obj) -> dict | None:
        return template_inspection(path=obj.path) or None


class PackageSerializer(serializers.ModelSerializer):
    class Meta:
        model = Package
        fields = ["name", "version", "description", "depends", "provides", "run_configurations"]


class BackendSerializer(serializers.ModelSerializer):
    class Meta:
        model = Backend
        fields = ["name", "kind", "cores", "memory_gb", "max_nodes", "enabled"]
