"""Operator API for compute backends (staff only): list, create, change, delete, check.

    GET/POST          /api/v1/admin/backends/
    GET/PATCH/DELETE  /api/v1/admin/backends/{name}/
    POST              /api/v1/admin/backends/{name}/check/
    GET               /api/v1/admin/backends/{name}/elastic/         (Slurm elastic partition)
    GET               /api/v1/admin/backends/{name}/elastic/files/   (what the admin installs)

Secrets are write-only: the answer says `has_key: true` and which secrets are set.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from administration.backends import backend_check, backend_create, backend_delete, backend_update
from administration.selectors import admin_url, elastic_nodes_with_runs
from catalog.choices import AdmissionPolicyName, BackendKind
from catalog.models import Backend
from compute.backends import elastic_files, elastic_report
from core.api.fields import SchemaField
from core.crypto import decrypt_json
from core.exceptions import ApplicationError, NotFound
from tenancy.permissions import IsStaff

# a backend's settings are its driver's own (docs/backends.md): an object of any keys
SETTINGS = {"type": "object", "description": "its driver's settings (docs/backends.md)"}


class BackendAdminOutSerializer(serializers.ModelSerializer):
    settings = SchemaField(SETTINGS, read_only=True)
    tenants = serializers.SerializerMethodField()
    has_key = serializers.SerializerMethodField()
    secrets_set = serializers.SerializerMethodField()
    admin_url = serializers.SerializerMethodField(help_text="its Django admin change form")

    class Meta:
        model = Backend
        fields = [
            "name",
            "kind",
            "settings",
            "cores",
            "memory_gb",
            "max_nodes",
            "enabled",
            "admission_policy",
            "fair_share_half_life",
            "stall_seconds",
            "default_wall_seconds",
            "max_wall_seconds",
            "tenants",
            "has_key",
            "secrets_set",
            "admin_url",
            "created_at",
            "updated_at",
        ]

    def get_tenants(self, obj) -> list[str]:
        return sorted(t.name for t in obj.tenants.all())

    def _secret_names(self, obj) -> list[str]:
        try:
            return sorted(decrypt_json(obj.secrets))
        except ApplicationError:
            return ["(undecryptable: enter the secrets again)"]

    def get_has_key(self, obj) -> bool:
        return "private_key" in self._secret_names(obj)

    def get_secrets_set(self, obj) -> list[str]:
        return self._secret_names(obj)

    def get_admin_url(self, obj) -> str:
        return admin_url(obj)


class BackendAdminInSerializer(serializers.Serializer):
    name = serializers.SlugField(max_length=64)
    kind = serializers.ChoiceField(choices=BackendKind.choices)
    settings = serializers.DictField(required=False)
    secrets = serializers.DictField(required=False, write_only=True)
    cores = serializers.IntegerField(min_value=1, required=False)
    memory_gb = serializers.FloatField(min_value=0.01, required=False)
    max_nodes = serializers.IntegerField(min_value=1, required=False)
    enabled = serializers.BooleanField(required=False)
    admission_policy = serializers.ChoiceField(
        choices=AdmissionPolicyName.choices,
        required=False,
        allow_blank=True,
        help_text="fifo, priority or fair_share (docs/scheduling.md); blank: the portal's default",
    )
    fair_share_half_life = serializers.FloatField(
        required=False,
        min_value=0.0,
        max_value=365 * 86400.0,
        help_text="fair_share: seconds after which past use counts half (0: only what is held)",
    )
    stall_seconds = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=1.0,
        max_value=30 * 86400.0,
        help_text="the least time a run may go without progress before its agent stops it "
        "(a study's convergence.stall_seconds wins); null: the portal's default (docs/live.md)",
    )
    default_wall_seconds = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=1.0,
        max_value=365 * 86400.0,
        help_text="the wall-time limit of a run whose study sets none; null: none",
    )
    max_wall_seconds = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=1.0,
        max_value=365 * 86400.0,
        help_text="the longest wall-time limit a run may have, its study's own included; "
        "null: no cap",
    )
    tenants = serializers.ListField(child=serializers.CharField(), required=False)


class BackendAdminPatchSerializer(BackendAdminInSerializer):
    # None takes an inherited field out (DRF's documented way), which the stubs do not allow
    name = None  # type: ignore[assignment]
    kind = None  # type: ignore[assignment]
    settings = serializers.DictField(required=False, allow_empty=True)

    def validate(self, attrs):
        for key in ("name", "kind"):
            if key in self.initial_data:
                raise serializers.ValidationError({key: "cannot be changed; create a new backend"})
        return attrs


# --- views -----------------------------------------------------------------------------------


def _get(name: str) -> Backend:
    backend = Backend.objects.prefetch_related("tenants").filter(name=name).first()
    if backend is None:
        raise NotFound(f"No backend named {name!r}.")
    return backend


class AdminBackendListView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(responses=BackendAdminOutSerializer(many=True))
    def get(self, request):
        backends = Backend.objects.prefetch_related("tenants").order_by("name")
        return Response(BackendAdminOutSerializer(backends, many=True).data)

    @extend_schema(request=BackendAdminInSerializer, responses={201: BackendAdminOutSerializer})
    def post(self, request):
        data = BackendAdminInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        backend = backend_create(data=dict(data.validated_data))
        return Response(BackendAdminOutSerializer(backend).data, status=status.HTTP_201_CREATED)


class AdminBackendDetailView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(responses=BackendAdminOutSerializer)
    def get(self, request, name: str):
        return Response(BackendAdminOutSerializer(_get(name)).data)

    @extend_schema(request=BackendAdminPatchSerializer, responses=BackendAdminOutSerializer)
    def patch(self, request, name: str):
        data = BackendAdminPatchSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        backend = backend_update(backend=_get(name), data=dict(data.validated_data))
        return Response(BackendAdminOutSerializer(_get(backend.name)).data)

    @extend_schema(responses={204: None})
    def delete(self, request, name: str):
        backend_delete(backend=_get(name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class CapacityReportSerializer(serializers.Serializer):
    cores = serializers.IntegerField()
    memory_gb = serializers.FloatField()
    nodes = serializers.IntegerField()


class BackendCheckSerializer(serializers.Serializer):
    """A backend's health check: {ok, capacity, …} (its driver may add facts of its own:
    partition, flavors, project_limits, …) or {ok: false, error}."""

    ok = serializers.BooleanField()
    capacity = CapacityReportSerializer(required=False)
    error = serializers.CharField(required=False)
    capacity_stored = serializers.BooleanField(
        required=False, help_text="the capacity the backend reported was stored as its own"
    )


class AdminBackendCheckView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(request=None, responses={200: BackendCheckSerializer})
    def post(self, request, name: str):
        return Response(backend_check(backend=_get(name)))


class ElasticNodeSerializer(serializers.Serializer):
    node = serializers.CharField()
    slurm_state = serializers.CharField()
    reason = serializers.CharField()
    failed_boot = serializers.BooleanField()
    server = serializers.CharField()
    server_status = serializers.CharField()
    address = serializers.CharField()
    uptime_seconds = serializers.IntegerField(allow_null=True)
    image = serializers.CharField(help_text="the image its server was booted from")
    jobs = serializers.ListField(child=serializers.CharField(), help_text="Slurm jobs on it")
    runs = serializers.ListField(child=serializers.CharField(), help_text="the runs of those jobs")
    utilisation = serializers.FloatField(
        allow_null=True, help_text="allocated ÷ total CPUs now, 0–1"
    )


class ElasticReportSerializer(serializers.Serializer):
    backend = serializers.CharField()
    partition = serializers.CharField()
    settings = SchemaField(
        {"type": "object", "description": "its settings.elastic (docs/backends.md)"}
    )
    ok = serializers.BooleanField()
    nodes = ElasticNodeSerializer(many=True)
    error = serializers.CharField(required=False)


class ElasticFilesSerializer(serializers.Serializer):
    files = serializers.DictField(child=serializers.CharField())


class AdminBackendElasticView(APIView):
    """A Slurm backend's elastic partition: each node's Slurm state beside its server's."""

    permission_classes = [IsStaff]

    @extend_schema(responses=ElasticReportSerializer)
    def get(self, request, name: str):
        backend = _get(name)
        return Response(
            elastic_nodes_with_runs(backend=backend, report=elastic_report(backend=backend))
        )


class AdminBackendElasticFilesView(APIView):
    """The slurm.conf lines, the power programs' config and their wrappers, rendered."""

    permission_classes = [IsStaff]

    @extend_schema(responses=ElasticFilesSerializer)
    def get(self, request, name: str):
        return Response({"files": elastic_files(backend=_get(name))})
