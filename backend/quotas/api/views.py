from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from quotas.selectors import quota_summary
from tenancy.selectors import tenant_for_user


class QuotaSerializer(serializers.Serializer):
    tenant = serializers.CharField()
    limits = serializers.DictField()
    usage = serializers.DictField(help_text="held by admitted, provisioning and running runs")
    queued = serializers.DictField(help_text="demand of queued runs")


class QuotaView(APIView):
    @extend_schema(responses=QuotaSerializer)
    def get(self, request):
        tenant = tenant_for_user(user=request.user)
        return Response({"tenant": tenant.name, **quota_summary(tenant=tenant)})
