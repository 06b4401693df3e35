"""Operator API for tenants, their members and their quotas (staff only).

    GET/POST          /api/v1/admin/tenants/                    list; create (with a quota)
    GET/PATCH         /api/v1/admin/tenants/{name}/             rename, deactivate, activate
    GET/PATCH         /api/v1/admin/tenants/{name}/quota/       every field of the quota
    GET/POST          /api/v1/admin/tenants/{name}/members/     list; add an existing user
    PATCH/DELETE      /api/v1/admin/tenants/{name}/members/{user_id}/   role; remove

Every object carries `admin_url`, its Django admin change form. A changed quota applies to
admission from now on (the answer's `note` says so): nothing running is stopped.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from administration import selectors
from administration.api import serializers as s
from quotas.models import Quota
from quotas.services import QUOTA_APPLIES, QUOTA_BOUNDS, quota_set, quota_update, tenant_open
from studies.usage import usage_for_tenant
from tenancy.choices import Role
from tenancy.models import Membership, Tenant
from tenancy.permissions import IsStaff
from tenancy.services import (
    membership_add,
    membership_remove,
    membership_set_role,
    tenant_update,
)

# --- serializers ---------------------------------------------------------------------------


def _bound(field: str, integer: bool) -> dict[str, Any]:
    low, high = QUOTA_BOUNDS[field]
    return {"min_value": int(low) if integer else low, "max_value": int(high) if integer else high}


class QuotaInSerializer(serializers.Serializer):
    """Any of the quota's fields; the bounds are quotas.services.QUOTA_BOUNDS."""

    cores = serializers.IntegerField(required=False, **_bound("cores", True))
    memory_gb = serializers.FloatField(required=False, **_bound("memory_gb", False))
    max_nodes = serializers.IntegerField(required=False, **_bound("max_nodes", True))
    max_runs = serializers.IntegerField(required=False, **_bound("max_runs", True))
    max_queued_runs = serializers.IntegerField(required=False, **_bound("max_queued_runs", True))
    storage_gb = serializers.FloatField(required=False, **_bound("storage_gb", False))
    core_hours_budget = serializers.FloatField(
        required=False,
        allow_null=True,
        help_text="core-hours per calendar month (UTC); null: no budget",
        **_bound("core_hours_budget", False),
    )
    share_weight = serializers.FloatField(
        required=False,
        help_text="fair_share backends: the tenant's weight (docs/scheduling.md)",
        **_bound("share_weight", False),
    )

    def to_internal_value(self, data):
        if isinstance(data, dict):  # a typo in a field name is an error, not ignored
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {unknown[0]: [f"not a quota field; known: {', '.join(self.fields)}"]}
                )
        return super().to_internal_value(data)


class QuotaFieldsSerializer(serializers.ModelSerializer):
    class Meta:
        model = Quota
        fields = [
            "cores",
            "memory_gb",
            "max_nodes",
            "max_runs",
            "max_queued_runs",
            "storage_gb",
            "core_hours_budget",
            "share_weight",
        ]


class QuotaAdminSerializer(serializers.Serializer):
    tenant = serializers.CharField()
    quota = QuotaFieldsSerializer()
    usage = s.ResourceSerializer(help_text="held now by the tenant's admitted and running runs")
    over = serializers.ListField(
        child=serializers.CharField(),
        help_text="limits the runs holding resources are over now (they go on; queued runs "
        "wait until usage falls under them)",
    )
    note = serializers.CharField(help_text="when a changed quota applies")
    admin_url = serializers.CharField(help_text="the quota's Django admin change form")


class TenantCreateSerializer(serializers.Serializer):
    name = serializers.SlugField(max_length=64, help_text="letters, digits, - and _")
    display_name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    quota = QuotaInSerializer(required=False, help_text="the defaults, then these")


class TenantPatchSerializer(serializers.Serializer):
    name = serializers.SlugField(max_length=64, required=False)
    display_name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    active = serializers.BooleanField(
        required=False,
        help_text="false deactivates: its members are refused by the API; its queued and "
        "running runs go on",
    )


class MemberSerializer(serializers.Serializer):
    user_id = serializers.IntegerField()
    username = serializers.CharField()
    email = serializers.CharField(allow_blank=True)
    role = serializers.ChoiceField(choices=Role.choices)
    joined_at = serializers.DateTimeField()
    admin_url = serializers.CharField(help_text="the membership's Django admin change form")
    user_admin_url = serializers.CharField(help_text="the user's Django admin change form")


class MemberAddSerializer(serializers.Serializer):
    user = serializers.CharField(max_length=254, help_text="an existing username or e-mail")
    role = serializers.ChoiceField(choices=Role.choices, default=Role.MEMBER)


class MemberPatchSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=Role.choices)


# --- shapes -------------------------------------------------------------------------------


def _member(m: Membership) -> dict[str, Any]:
    return {
        "user_id": m.user_id,
        "username": m.user.get_username(),
        "email": getattr(m.user, "email", "") or "",
        "role": m.role,
        "joined_at": m.created_at,
        "admin_url": selectors.admin_url(m),
        "user_admin_url": selectors.admin_url(m.user),
    }


def _quota(tenant: Tenant, quota: Quota) -> dict[str, Any]:
    usage = usage_for_tenant(tenant_id=tenant.pk)
    over = [
        field
        for field, used, limit in (
            ("cores", usage.cores, quota.cores),
            ("memory_gb", usage.memory_gb, quota.memory_gb),
            ("max_nodes", usage.nodes, quota.max_nodes),
            ("max_runs", usage.runs, quota.max_runs),
        )
        if used > limit
    ]
    return {
        "tenant": tenant.name,
        "quota": quota,
        "usage": usage,
        "over": over,
        "note": QUOTA_APPLIES,
        "admin_url": selectors.admin_url(quota),
    }


# --- views ----------------------------------------------------------------------------------


class AdminTenantsView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(responses=s.AdminTenantSerializer(many=True), operation_id="admin_tenants")
    def get(self, request):
        return Response(s.AdminTenantSerializer(selectors.tenant_overview_list(), many=True).data)

    @extend_schema(
        request=TenantCreateSerializer,
        responses={201: s.AdminTenantSerializer},
        operation_id="admin_tenant_create",
    )
    def post(self, request):
        data = TenantCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        tenant = tenant_open(
            name=v["name"], display_name=v.get("display_name", ""), limits=v.get("quota") or {}
        )
        body = s.AdminTenantSerializer(selectors.tenant_overview(tenant=tenant)).data
        return Response(body, status=status.HTTP_201_CREATED)


class AdminTenantDetailView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(responses=s.AdminTenantSerializer, operation_id="admin_tenant")
    def get(self, request, name: str):
        tenant = selectors.tenant_get(name=name)
        return Response(s.AdminTenantSerializer(selectors.tenant_overview(tenant=tenant)).data)

    @extend_schema(
        request=TenantPatchSerializer,
        responses=s.AdminTenantSerializer,
        operation_id="admin_tenant_update",
    )
    def patch(self, request, name: str):
        data = TenantPatchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        tenant = tenant_update(
            tenant=selectors.tenant_get(name=name),
            name=v.get("name"),
            display_name=v.get("display_name"),
            is_active=v.get("active"),
        )
        return Response(s.AdminTenantSerializer(selectors.tenant_overview(tenant=tenant)).data)


class AdminTenantQuotaView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(responses=QuotaAdminSerializer, operation_id="admin_tenant_quota")
    def get(self, request, name: str):
        tenant = selectors.tenant_get(name=name)
        return Response(
            QuotaAdminSerializer(_quota(tenant, quota_set(tenant=tenant, limits={}))).data
        )

    @extend_schema(
        request=QuotaInSerializer,
        responses=QuotaAdminSerializer,
        operation_id="admin_tenant_quota_update",
    )
    def patch(self, request, name: str):
        tenant = selectors.tenant_get(name=name)
        data = QuotaInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        quota = quota_update(
            quota=quota_set(tenant=tenant, limits={}), limits=dict(data.validated_data)
        )
        return Response(QuotaAdminSerializer(_quota(tenant, quota)).data)


class AdminTenantMembersView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(responses=MemberSerializer(many=True), operation_id="admin_tenant_members")
    def get(self, request, name: str):
        tenant = selectors.tenant_get(name=name)
        members = [_member(m) for m in selectors.member_list(tenant=tenant)]
        return Response(MemberSerializer(members, many=True).data)

    @extend_schema(
        request=MemberAddSerializer,
        responses={201: MemberSerializer},
        operation_id="admin_tenant_member_add",
    )
    def post(self, request, name: str):
        tenant = selectors.tenant_get(name=name)
        data = MemberAddSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        membership = membership_add(
            tenant=tenant,
            user_ref=data.validated_data["user"],
            role=Role(data.validated_data["role"]),
        )
        member = selectors.member_get(tenant=tenant, user_id=membership.user_id)
        return Response(MemberSerializer(_member(member)).data, status=status.HTTP_201_CREATED)


class AdminTenantMemberView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(
        request=MemberPatchSerializer,
        responses=MemberSerializer,
        operation_id="admin_tenant_member_update",
    )
    def patch(self, request, name: str, user_id: int):
        tenant = selectors.tenant_get(name=name)
        data = MemberPatchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        membership = membership_set_role(
            membership=selectors.member_get(tenant=tenant, user_id=user_id),
            role=Role(data.validated_data["role"]),
        )
        return Response(MemberSerializer(_member(membership)).data)

    @extend_schema(responses={204: None}, operation_id="admin_tenant_member_remove")
    def delete(self, request, name: str, user_id: int):
        tenant = selectors.tenant_get(name=name)
        membership_remove(membership=selectors.member_get(tenant=tenant, user_id=user_id))
        return Response(status=status.HTTP_204_NO_CONTENT)
