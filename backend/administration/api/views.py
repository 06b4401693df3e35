"""The operator overview: /api/v1/admin/overview/ (staff accounts only); tenants, members and
quotas: api/tenants.py; backends: api/backends.py."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from administration import selectors
from administration.api import serializers as s
from tenancy.permissions import IsStaff


class AdminOverviewView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(responses=s.AdminOverviewSerializer, operation_id="admin_overview")
    def get(self, request):
        return Response(s.AdminOverviewSerializer(selectors.portal_overview()).data)
