"""Operator API for the runs of every tenant (staff only; docs/admin.md, "Operations").

    GET   /api/v1/admin/runs/?state=running&state=pending&backend=…&tenant=…&limit=&offset=
    POST  /api/v1/admin/runs/{id}/stop/   {"reason": "…"}

A tenant's own account is refused (403) as on every admin endpoint; tenants see their own
runs at /api/v1/runs/.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from administration.operations import (
    REASON_MAX,
    operations_run_get,
    operations_run_stop,
    operations_runs,
)
from core.api.params import int_param
from studies.models import Run
from tenancy.permissions import IsStaff

PAGE_MAX = 500


class OperationsRunSerializer(serializers.ModelSerializer):
    study = serializers.UUIDField(source="study_id", read_only=True)
    study_name = serializers.CharField(source="study.name", read_only=True)
    owner = serializers.SerializerMethodField(help_text="the username of the study's owner")
    tenant = serializers.CharField(source="tenant.name", read_only=True)
    backend = serializers.CharField(source="backend.name", read_only=True)

    class Meta:
        model = Run
        fields = [
            "id",
            "study",
            "study_name",
            "index",
            "owner",
            "tenant",
            "backend",
            "state",
            "phase",
            "wait_reason",
            "wait_detail",
            "attempt",
            "processes",
            "iterations",
            "cpu_percent",
            "queued_at",
            "started_at",
            "heartbeat_at",
            "end_reason",
            "message",
        ]

    def get_owner(self, obj: Run) -> str:
        owner = obj.study.owner
        return owner.username if owner is not None else ""


class OperationsRunsPageSerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="the runs that match, on every page")
    results = OperationsRunSerializer(many=True)


class OperationsStopSerializer(serializers.Serializer):
    reason = serializers.CharField(
        max_length=REASON_MAX,
        help_text="why the run is stopped: its owner sees it in the run's message",
    )


class AdminRunsView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(
        operation_id="admin_runs_list",
        parameters=[
            OpenApiParameter(
                "state",
                OpenApiTypes.STR,
                many=True,
                description="pending, admitted, provisioning or running (repeat for several; "
                "none: all four)",
            ),
            OpenApiParameter("backend", OpenApiTypes.STR, description="a backend's name"),
            OpenApiParameter("tenant", OpenApiTypes.STR, description="a tenant's name"),
            OpenApiParameter("limit", OpenApiTypes.INT, description=f"1–{PAGE_MAX} (100)"),
            OpenApiParameter("offset", OpenApiTypes.INT),
        ],
        responses=OperationsRunsPageSerializer,
    )
    def get(self, request):
        """Every tenant's active runs, running ones first, then those that wait."""
        states = [s for raw in request.query_params.getlist("state") for s in raw.split(",") if s]
        runs = operations_runs(
            states=states,
            backend=request.query_params.get("backend", ""),
            tenant=request.query_params.get("tenant", ""),
        )
        limit = int_param(request, "limit", 100, low=1, high=PAGE_MAX)
        offset = int_param(request, "offset", 0, low=0, high=10**9)
        page = runs[offset : offset + limit]
        return Response(
            {
                "count": runs.order_by().count(),
                "results": OperationsRunSerializer(page, many=True).data,
            }
        )


class AdminRunStopView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(
        operation_id="admin_runs_stop",
        request=OperationsStopSerializer,
        responses=OperationsRunSerializer,
    )
    def post(self, request, run_id: str):
        """Stop a run of any tenant with a reason, as its owner's cancel would."""
        run = operations_run_get(run_id=run_id)
        data = OperationsStopSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = operations_run_stop(run=run, by=request.user, reason=data.validated_data["reason"])
        return Response(OperationsRunSerializer(run).data)
