"""Operator API for compute backends (staff only): list, create, change, delete, check.

    GET/POST          /api/v1/admin/backends/
    GET/PATCH/DELETE  /api/v1/admin/backends/{name}/
    POST              /api/v1/admin/backends/{name}/check/

Settings are validated per kind (the Slurm driver's own validator, so the API and the
driver never disagree). Secrets — an SSH private key, its passphrase, the login node's
known_hosts line — are write-only: accepted on write, stored Fernet-encrypted in
`Backend.secrets`, never returned (the answer says `has_key: true` and which secrets are set).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from administration.api.permissions import IsStaff
from catalog.choices import BackendKind
from catalog.models import Backend
from core.crypto import decrypt_json, encrypt_json
from core.exceptions import ApplicationError, Conflict, ErrorCode, NotFound
from orchestration.drivers.base import DriverError, get_driver
from studies.choices import ACTIVE_STATES
from tenancy.models import Tenant

# --- services (writes) ---------------------------------------------------------------------

SECRET_FIELDS: dict[str, tuple[str, ...]] = {
    BackendKind.SLURM: ("private_key", "passphrase", "known_hosts"),
    BackendKind.OPENSTACK: ("password", "application_credential_secret"),
}


def _invalid(message: str, field: str) -> ApplicationError:
    return ApplicationError(message, field=field)


def backend_settings_validate(
    *, kind: str, settings: dict[str, Any], secrets: dict[str, Any]
) -> dict[str, Any]:
    """Normalised settings for `kind`, or an ApplicationError naming the field."""
    if not isinstance(settings, dict):
        raise _invalid("settings must be an object", "settings")
    if kind == BackendKind.OPENSTACK:
        from catalog.vm import bake_settings
        from orchestration.drivers.openstack import SettingsError as OpenStackSettingsError
        from orchestration.drivers.openstack import validate_settings as openstack_settings

        try:
            openstack_settings(settings)
        except OpenStackSettingsError as exc:
            raise _invalid(exc.message, f"settings.{exc.field}") from exc
        bake_settings(settings)  # base_image, bake_flavor, bake_timeout, … (ApplicationError)
        if settings.get("auth_url") and not (
            secrets.get("application_credential_secret") or secrets.get("password")
        ):
            raise _invalid(
                "auth_url needs secrets.application_credential_secret (with settings."
                "application_credential_id) or secrets.password (with username and project)",
                "secrets.application_credential_secret",
            )
        return {k: v for k, v in settings.items() if v not in (None, "")}
    if kind != BackendKind.SLURM:
        return settings
    from orchestration.drivers.slurm import SettingsError, validate_settings
    from orchestration.transports.base import TransportError

    try:
        clean = validate_settings(settings, strict=True)
    except SettingsError as exc:
        raise _invalid(exc.message, f"settings.{exc.field}") from exc
    if clean["transport"] == "ssh":
        if not secrets.get("private_key"):
            raise _invalid(
                "the ssh transport needs a private key (secrets.private_key, OpenSSH format)",
                "secrets.private_key",
            )
        if not secrets.get("known_hosts"):
            raise _invalid(
                "the ssh transport needs the login node's host key as a known_hosts line "
                "(secrets.known_hosts, e.g. from `ssh-keyscan -p PORT HOST` checked against "
                "the node's fingerprint); the portal never trusts an unknown host key",
                "secrets.known_hosts",
            )
        from orchestration.transports.ssh import _known_hosts, load_private_key

        try:
            load_private_key(secrets["private_key"], secrets.get("passphrase"))
        except TransportError as exc:
            raise _invalid(str(exc), "secrets.private_key") from exc
        try:
            _known_hosts(secrets["known_hosts"])
        except TransportError as exc:
            raise _invalid(str(exc), "secrets.known_hosts") from exc
    # keep what the admin wrote (minus defaults) so a later default change applies
    return {k: v for k, v in settings.items() if v not in (None, "")}


def _clean_secrets(kind: str, raw: Any, current: dict[str, Any]) -> dict[str, Any]:
    if raw is None:
        return current
    if not isinstance(raw, dict):
        raise _invalid("secrets must be an object", "secrets")
    allowed = SECRET_FIELDS.get(kind, ())
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        names = ", ".join(allowed) or "none"
        raise _invalid(
            f"unknown secret for a {kind} backend; known: {names}", f"secrets.{unknown[0]}"
        )
    merged = dict(current)
    for key, value in raw.items():
        if value in (None, ""):
            merged.pop(key, None)  # null or "" removes a secret
        elif not isinstance(value, str):
            raise _invalid("must be a string", f"secrets.{key}")
        else:
            merged[key] = value.strip() + ("\n" if key == "private_key" else "")
    return merged


def _tenants(names: Any) -> list[Tenant]:
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _invalid("tenants must be a list of tenant names ([] = every tenant)", "tenants")
    found = {t.name: t for t in Tenant.objects.filter(name__in=names)}
    missing = [n for n in names if n not in found]
    if missing:
        raise _invalid(f"no tenant named {missing[0]!r}", "tenants")
    return [found[n] for n in names]


def _apply_capacity(backend: Backend, data: dict[str, Any], *, creating: bool) -> None:
    for field in ("cores", "memory_gb", "max_nodes"):
        if field in data:
            setattr(backend, field, data[field])
    asks = backend.kind == BackendKind.SLURM and backend.settings.get("capacity") == "ask"
    if asks and not ({"cores", "memory_gb"} <= set(data)):
        report = backend_check(backend=backend, save=False)
        if not report.get("ok"):
            raise _invalid(
                f"capacity 'ask' needs an answer from Slurm: {report.get('error')}",
                "settings.capacity",
            )
    elif creating and not {"cores", "memory_gb"} <= set(data):
        raise _invalid(
            "give cores and memory_gb (what the portal may use at once), or for Slurm set "
            "settings.capacity to 'ask'",
            "cores",
        )


@transaction.atomic
def backend_create(*, data: dict[str, Any]) -> Backend:
    name, kind = data["name"], data["kind"]
    if Backend.objects.filter(name=name).exists():
        raise Conflict(f"a backend named {name!r} exists already", code=ErrorCode.CONFLICT)
    secrets = _clean_secrets(kind, data.get("secrets"), {})
    backend = Backend(name=name, kind=kind, enabled=data.get("enabled", True))
    backend.settings = backend_settings_validate(
        kind=kind, settings=data.get("settings") or {}, secrets=secrets
    )
    backend.secrets = encrypt_json(secrets)
    backend.cores, backend.memory_gb, backend.max_nodes = 1, 1.0, data.get("max_nodes", 1)
    _apply_capacity(backend, data, creating=True)
    backend.save()
    if "tenants" in data:
        backend.tenants.set(_tenants(data["tenants"]))
    return backend


@transaction.atomic
def backend_update(*, backend: Backend, data: dict[str, Any]) -> Backend:
    backend = Backend.objects.select_for_update().get(pk=backend.pk)
    secrets = _clean_secrets(backend.kind, data.get("secrets"), decrypt_json(backend.secrets))
    settings = dict(backend.settings or {})
    if "settings" in data:
        if not isinstance(data["settings"], dict):
            raise _invalid("settings must be an object", "settings")
        for key, value in data["settings"].items():  # a merge: null removes a setting
            if value is None:
                settings.pop(key, None)
            else:
                settings[key] = value
    backend.settings = backend_settings_validate(
        kind=backend.kind, settings=settings, secrets=secrets
    )
    backend.secrets = encrypt_json(secrets)
    if "enabled" in data:
        backend.enabled = data["enabled"]
    _apply_capacity(backend, data, creating=False)
    backend.save()
    if "tenants" in data:
        backend.tenants.set(_tenants(data["tenants"]))
    return backend


@transaction.atomic
def backend_delete(*, backend: Backend) -> None:
    if backend.runs.filter(state__in=ACTIVE_STATES).exists():
        raise Conflict(
            f"backend {backend.name} still has queued or running runs; disable it first and "
            "let them finish (or cancel them)",
            code=ErrorCode.STATE,
        )
    if backend.runs.exists() or backend.study_set.exists():
        raise Conflict(
            f"backend {backend.name} has studies and runs in its history; disable it instead "
            "(enabled: false) so their records stay",
            code=ErrorCode.STATE,
        )
    backend.delete()


def backend_check(*, backend: Backend, save: bool = True) -> dict[str, Any]:
    """Connect and report capacity and health; with capacity 'ask', store what Slurm says."""
    opts = dict(backend.settings or {})
    if backend.kind in SECRET_FIELDS and backend.secrets:
        opts["secrets"] = decrypt_json(backend.secrets)
    try:
        driver = get_driver(backend.kind, opts)
        if hasattr(driver, "check"):
            report = driver.check()
        else:
            caps = driver.capabilities()
            report = {
                "ok": True,
                "capacity": {
                    "cores": caps.cores,
                    "memory_gb": caps.memory_gb,
                    "nodes": caps.max_nodes,
                },
            }
    except DriverError as exc:
        return {"ok": False, "error": str(exc)}
    if backend.kind == BackendKind.SLURM and (backend.settings or {}).get("capacity") == "ask":
        cap = report["capacity"]
        backend.cores, backend.memory_gb, backend.max_nodes = (
            cap["cores"],
            cap["memory_gb"],
            cap["nodes"],
        )
        if save and backend.pk:
            Backend.objects.filter(pk=backend.pk).update(
                cores=backend.cores, memory_gb=backend.memory_gb, max_nodes=backend.max_nodes
            )
        report["capacity_stored"] = True
    return report


# --- serializers ---------------------------------------------------------------------------


class BackendAdminOutSerializer(serializers.ModelSerializer):
    tenants = serializers.SerializerMethodField()
    has_key = serializers.SerializerMethodField()
    secrets_set = serializers.SerializerMethodField()

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
            "tenants",
            "has_key",
            "secrets_set",
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


class BackendAdminInSerializer(serializers.Serializer):
    name = serializers.SlugField(max_length=64)
    kind = serializers.ChoiceField(choices=BackendKind.choices)
    settings = serializers.DictField(required=False)
    secrets = serializers.DictField(required=False, write_only=True)
    cores = serializers.IntegerField(min_value=1, required=False)
    memory_gb = serializers.FloatField(min_value=0.01, required=False)
    max_nodes = serializers.IntegerField(min_value=1, required=False)
    enabled = serializers.BooleanField(required=False)
    tenants = serializers.ListField(child=serializers.CharField(), required=False)


class BackendAdminPatchSerializer(BackendAdminInSerializer):
    name = None
    kind = None
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


class AdminBackendCheckView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(request=None, responses={200: dict})
    def post(self, request, name: str):
        return Response(backend_check(backend=_get(name)))
