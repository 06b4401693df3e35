from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from studies.usage import quota_summary
from tenancy.selectors import tenant_for_member


class LimitSourceSerializer(serializers.Serializer):
    value = serializers.FloatField()
    # a field named `source`: DRF's serializer metaclass takes declared fields out of the
    # class, so it never shadows Field.source, which the stubs cannot see
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=["portal quota", "backend capacity", "cloud project limit"]
    )


class EffectiveLimitsSerializer(serializers.Serializer):
    cores = LimitSourceSerializer()
    memory_gb = LimitSourceSerializer()
    nodes = LimitSourceSerializer()


class EffectiveBackendSerializer(serializers.Serializer):
    backend = serializers.CharField()
    kind = serializers.CharField()
    limits = EffectiveLimitsSerializer()
    cloud_read_at = serializers.DateTimeField(allow_null=True)
    cloud_error = serializers.CharField(allow_blank=True)


class CoreHoursSerializer(serializers.Serializer):
    used = serializers.FloatField(help_text="core-hours the tenant's runs used this period")
    budget = serializers.FloatField(allow_null=True, help_text="null: no budget set")
    period_start = serializers.DateTimeField(help_text="the period: the calendar month (UTC)")


class StorageSerializer(serializers.Serializer):
    used_gb = serializers.FloatField(
        help_text="what the portal stores for the tenant: case uploads (unpacked), result "
        "archives and the run directories it keeps (each at the size its agent last reported)"
    )
    used_bytes = serializers.IntegerField(help_text="used_gb, in bytes")
    limit_gb = serializers.FloatField(help_text="the tenant's storage quota (storage_gb)")
    full = serializers.BooleanField(
        help_text="the quota is used up: submissions are refused and queued runs wait until "
        "some is deleted"
    )
    problem = serializers.CharField(
        allow_blank=True, help_text="when full: what that means and what to do; else empty"
    )


class ShapeSerializer(serializers.Serializer):
    cores = serializers.IntegerField()
    memory_gb = serializers.FloatField()
    nodes = serializers.IntegerField()


class AmountsSerializer(ShapeSerializer):
    """Cores, memory and nodes, and the runs that hold (or want) them."""

    runs = serializers.IntegerField()


class QuotaAmountsSerializer(AmountsSerializer):
    """A tenant's quota (or, in use, what its runs and files take of it)."""

    queued_runs = serializers.IntegerField(help_text="runs queued at once")
    storage_gb = serializers.FloatField()


class QuotaLimitsSerializer(QuotaAmountsSerializer):
    core_hours_budget = serializers.FloatField(allow_null=True, help_text="null: no budget")


class QuotaSerializer(serializers.Serializer):
    tenant = serializers.CharField()
    limits = QuotaLimitsSerializer(help_text="the tenant's quota")
    usage = AmountsSerializer(help_text="held by admitted, provisioning and running runs")
    queued = AmountsSerializer(help_text="demand of queued runs")
    backends = EffectiveBackendSerializer(
        many=True,
        help_text="per backend the tenant may use: the effective limits (the smallest of the "
        "portal quota, the backend's capacity and, on OpenStack, the cloud project's limits) "
        "and where each comes from",
    )
    core_hours = CoreHoursSerializer()
    storage = StorageSerializer()


class EstimateSerializer(serializers.Serializer):
    """What the study will cost, from the tenant's earlier completed runs of the same case
    and solver (studies/estimate.py): ranges [low, high], null without an earlier run."""

    based_on = serializers.IntegerField(help_text="earlier completed runs the estimate reads")
    runs = serializers.IntegerField(help_text="runs counted (an adaptive study: its budget)")
    run_core_hours = serializers.ListField(child=serializers.FloatField(), allow_null=True)
    run_wall_seconds = serializers.ListField(
        child=serializers.FloatField(), allow_null=True, help_text="at this study's cores"
    )
    core_hours = serializers.ListField(child=serializers.FloatField(), allow_null=True)
    wall_seconds = serializers.ListField(
        child=serializers.FloatField(),
        allow_null=True,
        help_text="its waves at the runs that fit at once, queueing left out",
    )
    summary = serializers.CharField()


class QuotaView(APIView):
    @extend_schema(responses=QuotaSerializer)
    def get(self, request):
        tenant = tenant_for_member(user=request.user)
        return Response({"tenant": tenant.name, **quota_summary(tenant=tenant)})
