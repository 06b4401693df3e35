from rest_framework import serializers


class ResourceSerializer(serializers.Serializer):
    cores = serializers.IntegerField()
    memory_gb = serializers.FloatField()
    nodes = serializers.IntegerField()
    runs = serializers.IntegerField()


class LimitsSerializer(serializers.Serializer):
    cores = serializers.IntegerField()
    memory_gb = serializers.FloatField()
    nodes = serializers.IntegerField()
    runs = serializers.IntegerField()
    queued_runs = serializers.IntegerField()
    storage_gb = serializers.FloatField()
    core_hours_budget = serializers.FloatField(allow_null=True)


class AdminTenantSerializer(serializers.Serializer):
    name = serializers.CharField()
    display_name = serializers.CharField()
    active = serializers.BooleanField(help_text="false: deactivated, its members are refused")
    admin_url = serializers.CharField(help_text="the tenant's Django admin change form")
    quota_admin_url = serializers.CharField(
        allow_null=True, help_text="the quota's Django admin change form"
    )
    members = serializers.IntegerField()
    studies = serializers.IntegerField()
    limits = LimitsSerializer(allow_null=True)
    usage = ResourceSerializer(help_text="held by admitted, provisioning and running runs")
    queued = ResourceSerializer(help_text="demand of queued runs")
    created_at = serializers.DateTimeField()


class CapacitySerializer(serializers.Serializer):
    cores = serializers.IntegerField()
    memory_gb = serializers.FloatField()
    nodes = serializers.IntegerField()


class HealthSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "degraded", "disabled"])
    detail = serializers.CharField()
    stalled = serializers.IntegerField(
        help_text="its runs stopped in the last hour for making no progress"
    )


class AdminBackendSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.CharField()
    enabled = serializers.BooleanField()
    capacity = CapacitySerializer()
    usage = ResourceSerializer()
    queued = ResourceSerializer()
    tenants = serializers.ListField(child=serializers.CharField(), help_text="empty = every tenant")
    health = HealthSerializer()
    admin_url = serializers.CharField(help_text="the backend's Django admin change form")


class AdminPackageSerializer(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.CharField()
    description = serializers.CharField()
    depends = serializers.ListField(child=serializers.CharField())
    solvers = serializers.ListField(child=serializers.CharField())


class AdminImageSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.CharField()
    status = serializers.CharField()
    digest = serializers.CharField()
    packages = serializers.ListField(
        child=serializers.CharField(), help_text="the packages asked for"
    )
    solvers = serializers.ListField(child=serializers.CharField())
    size_bytes = serializers.IntegerField(allow_null=True)
    error = serializers.CharField()
    built_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    admin_url = serializers.CharField(help_text="the image's Django admin change form")


class RunsByStateSerializer(serializers.Serializer):
    pending = serializers.IntegerField()
    admitted = serializers.IntegerField()
    provisioning = serializers.IntegerField()
    running = serializers.IntegerField()
    completed = serializers.IntegerField()
    failed = serializers.IntegerField()
    cancelled = serializers.IntegerField()


class AdminOverviewSerializer(serializers.Serializer):
    tenants = serializers.IntegerField()
    users = serializers.IntegerField()
    studies = serializers.IntegerField()
    runs_by_state = RunsByStateSerializer()
    backends = AdminBackendSerializer(many=True)
    packages = AdminPackageSerializer(many=True)
    images = AdminImageSerializer(many=True)
