from rest_framework import serializers

from catalog.models import Backend, CaseTemplate, Package


class TemplateSerializer(serializers.ModelSerializer):
    parameters = serializers.SerializerMethodField()
    derived = serializers.SerializerMethodField()
    objectives = serializers.SerializerMethodField()
    resources = serializers.SerializerMethodField()
    solvers = serializers.SerializerMethodField()
    demo = serializers.SerializerMethodField()

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


class PackageSerializer(serializers.ModelSerializer):
    class Meta:
        model = Package
        fields = ["name", "version", "description", "depends", "provides", "run_configurations"]


class BackendSerializer(serializers.ModelSerializer):
    class Meta:
        model = Backend
        fields = ["name", "kind", "cores", "memory_gb", "max_nodes", "enabled"]
