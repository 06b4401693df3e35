"""Compute backends as an operator manages them: create, change, delete, check.

Settings are validated by the backend's own driver (compute.backends: the API and the
driver never disagree), the bake settings of VM images too (orchestration/composer/bake.py).
Secrets (an SSH private key, its passphrase, the login node's known_hosts line, a cloud
password) are write-only: accepted on write, stored Fernet-encrypted in `Backend.secrets`,
never returned.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from catalog.models import Backend
from compute import backends as compute_backends
from core.crypto import decrypt_json, encrypt_json, reencrypt
from core.exceptions import ApplicationError, Conflict, ErrorCode
from studies.choices import ACTIVE_STATES
from tenancy.models import Tenant

# --- services (writes) ---------------------------------------------------------------------


def _invalid(message: str, field: str) -> ApplicationError:
    return ApplicationError(message, field=field)


def backend_settings_validate(
    *, kind: str, settings: dict[str, Any], secrets: dict[str, Any]
) -> dict[str, Any]:
    """Normalised settings for `kind`, or an ApplicationError naming the field."""
    return compute_backends.settings_validate(kind=kind, settings=settings, secrets=secrets)


def _clean_secrets(kind: str, raw: Any, current: dict[str, Any]) -> dict[str, Any]:
    if raw is None:
        return current
    if not isinstance(raw, dict):
        raise _invalid("secrets must be an object", "secrets")
    allowed = compute_backends.secret_fields(kind)
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
    asks = compute_backends.capacity_from_backend(backend)
    if asks and not ({"cores", "memory_gb"} <= set(data)):
        report = backend_check(backend=backend, save=False)
        if not report.get("ok"):
            raise _invalid(
                f"capacity 'ask' needs an answer from Slurm: {report.get('error')}",
                "settings.capacity",
            )
    elif creating and not {"cores", "memory_gb"} <= set(data):
        raise _invalid(
            "give cores and memory_gb (what the portal may use at once), or, where the backend "
            "can say it (Slurm), set settings.capacity to 'ask'",
            "cores",
        )


def _apply_admission(backend: Backend, data: dict[str, Any]) -> None:
    """The admission policy and its fair-share half-life (checked by the serializer)."""
    if "admission_policy" in data:
        backend.admission_policy = data["admission_policy"]
    if "fair_share_half_life" in data:
        backend.fair_share_half_life = float(data["fair_share_half_life"])


def _apply_limits(backend: Backend, data: dict[str, Any]) -> None:
    """The watchdog's floor and the wall-time default and cap of the backend's runs (checked
    one by one by the serializer; null clears one): the default may not exceed the cap."""
    for field in ("stall_seconds", "default_wall_seconds", "max_wall_seconds"):
        if field in data:
            setattr(backend, field, data[field])
    default, cap = backend.default_wall_seconds, backend.max_wall_seconds
    if default is not None and cap is not None and default > cap:
        raise _invalid(
            f"the default wall time ({default:g} s) is above the backend's cap "
            f"(max_wall_seconds, {cap:g} s); lower the default or raise the cap",
            "default_wall_seconds",
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
    _apply_admission(backend, data)
    _apply_limits(backend, data)
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
    _apply_admission(backend, data)
    _apply_limits(backend, data)
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


def backends_reencrypt_secrets() -> tuple[list[str], list[str]]:
    """Every backend's stored secrets encrypted again with the current key (after
    WINDTUNNEL_SECRETS_KEY was set or changed): the names of the backends done, and of those
    whose secrets no configured key decrypts (they must be entered again)."""
    done, failed = [], []
    for backend in Backend.objects.exclude(secrets="").order_by("name"):
        with transaction.atomic():
            row = Backend.objects.select_for_update().get(pk=backend.pk)
            try:
                token = reencrypt(row.secrets)
            except ApplicationError:
                failed.append(row.name)
                continue
            Backend.objects.filter(pk=row.pk).update(secrets=token)
            done.append(row.name)
    return done, failed


def backend_check(*, backend: Backend, save: bool = True) -> dict[str, Any]:
    """Connect and report capacity and health; a backend that says its own capacity (Slurm
    with capacity 'ask') has it stored."""
    report = compute_backends.health_check(backend=backend)
    if report.get("ok") and compute_backends.capacity_from_backend(backend):
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
