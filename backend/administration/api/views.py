"""Read-only operator endpoints: /api/v1/admin/… (staff accounts only)."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from administration import selectors
from administration.api import serializers as s
from tenancy.permissions import IsStaff


class AdminTenantsView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(responses=s.AdminTenantSerializer(many=True), operation_id="admin_tenants")
    def get(self, request):
        return Response(s.AdminTenantSerializer(selectors.tenant_overview_list(), many=True).data)


class AdminOverviewView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(responses=s.AdminOverviewSerializer, operation_id="admin_overview")
    def get(self, request):
        return Response(s.AdminOverviewSerializer(selectors.portal_overview()).data)
