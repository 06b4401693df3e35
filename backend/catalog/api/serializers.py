from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from catalog.inspection import template_inspection
from catalog.models import Backend, CaseTemplate, Package
from core.api.fields import SchemaField
from core.schemas import component_ref, inlined, map_of
from orchestration.composer.manifest import SCHEMA_PATH as PACKAGE_SCHEMA

# a case's files with {{ placeholders }} (orchestration.render.find_placeholders)
PLACEHOLDERS = map_of({"type": "array", "items": {"type": "string"}})


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


class TemplateParameterSerializer(serializers.Serializer):
    """A parameter a template declares (templates/<name>/template.yaml)."""

    type = serializers.ChoiceField(choices=["float", "int", "str"], required=False)
    unit = serializers.CharField(required=False, allow_blank=True)
    default = SchemaField(component_ref("Scalar"), required=False)
    min = serializers.FloatField(required=False)
    max = serializers.FloatField(required=False)
    choices = SchemaField(
        {"type": "array", "items": component_ref("Scalar")},
        required=False,
        help_text="the values it may take, when listed",
    )
    description = serializers.CharField(required=False)


class TemplateSerializer(serializers.ModelSerializer):
    parameters = serializers.SerializerMethodField()
    derived = serializers.SerializerMethodField()
    objectives = serializers.SerializerMethodField()
    resources = serializers.SerializerMethodField()
    solvers = serializers.SerializerMethodField()
    demo = serializers.SerializerMethodField()
    inspection = serializers.SerializerMethodField()
    placeholders = SchemaField(
        PLACEHOLDERS,
        read_only=True,
        help_text="its files with {{ placeholders }}: the names each uses",
    )

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

    @extend_schema_field(serializers.DictField(child=TemplateParameterSerializer()))
    def get_parameters(self, obj) -> dict:
        return obj.spec.get("parameters") or {}

    @extend_schema_field(
        serializers.DictField(
            child=serializers.CharField(), help_text="values computed from the parameters"
        )
    )
    def get_derived(self, obj) -> dict:
        return obj.spec.get("derived") or {}

    @extend_schema_field(map_of(component_ref("ObjectiveSpec")))
    def get_objectives(self, obj) -> dict:
        return obj.spec.get("objectives") or {}

    @extend_schema_field(component_ref("RunResources"))
    def get_resources(self, obj) -> dict:
        return obj.spec.get("resources") or {}

    def get_solvers(self, obj) -> list[str]:
        return list(obj.spec.get("solvers") or [obj.solver])

    @extend_schema_field(
        {
            "type": "object",
            "description": "a first study of it: the spec's parameters and combine",
            "properties": {
                "parameters": map_of(component_ref("ParameterSpec")),
                "combine": component_ref("Combine"),
            },
        }
    )
    def get_demo(self, obj) -> dict:
        return obj.spec.get("demo") or {}

    @extend_schema_field(InspectionSerializer(allow_null=True))
    def get_inspection(self, obj) -> dict | None:
        return template_inspection(path=obj.path) or None


class PackageSerializer(serializers.ModelSerializer):
    """A solver package, typed by its manifest's schema (packages/package.schema.json)."""

    depends = SchemaField(inlined(PACKAGE_SCHEMA, "properties", "depends"), read_only=True)
    provides = SchemaField(inlined(PACKAGE_SCHEMA, "properties", "provides"), read_only=True)
    run_configurations = SchemaField(
        inlined(PACKAGE_SCHEMA, "properties", "run_configurations"), read_only=True
    )

    class Meta:
        model = Package
        fields = ["name", "version", "description", "depends", "provides", "run_configurations"]


class BackendSerializer(serializers.ModelSerializer):
    class Meta:
        model = Backend
        fields = ["name", "kind", "cores", "memory_gb", "max_nodes", "enabled"]
