"""An OpenStack backend's settings: what an admin may set, checked and normalised.

Names and ids that reach an API call or a boot script pass a pattern here first; the
password or application credential secret lives in the backend's encrypted secrets, never
in its settings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from orchestration.drivers.base import SettingsError

__all__ = ["AUTH_FIELDS", "SECRET_FIELDS", "validate_settings"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@ -]{0,254}$")
_PATH = re.compile(r"^/[A-Za-z0-9._/-]{1,200}$")

# keystone fields a backend's settings may carry; the password or application credential
# secret lives in the backend's encrypted secrets
AUTH_FIELDS = (
    "auth_url",
    "application_credential_id",
    "username",
    "user_domain_name",
    "project_name",
    "project_domain_name",
    "project_id",
)
SECRET_FIELDS = ("password", "application_credential_secret")


def _opt_name(raw: Mapping[str, Any], key: str, what: str) -> str:
    value = raw.get(key) or ""
    if value and (not isinstance(value, str) or not _NAME.match(value)):
        raise SettingsError(key, f"{what} must be a name or id (letters, digits, ._:/@- )")
    return value


def _num(raw: Mapping[str, Any], key: str, default: float, lo: float, hi: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        raise SettingsError(key, f"must be a number from {lo:g} to {hi:g}")
    return float(value)


def validate_settings(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The backend's settings, checked; SettingsError names the field and the fix."""
    if not isinstance(raw, Mapping):
        raise SettingsError("settings", "must be an object")
    network = raw.get("network", "none")
    if network != "none":
        network = _opt_name(raw, "network", "network")
        if not network:
            raise SettingsError("network", 'give a network name or id, or "none"')
    groups = raw.get("security_groups") or []
    if not isinstance(groups, list) or not all(
        isinstance(g, str) and _NAME.match(g) for g in groups
    ):
        raise SettingsError("security_groups", "must be a list of security group names")
    work_root = raw.get("vm_work_root", "/var/lib/windtunnel/runs")
    if not isinstance(work_root, str) or not _PATH.match(work_root) or ".." in work_root:
        raise SettingsError("vm_work_root", "must be an absolute path of plain characters")
    python = raw.get("vm_python", "python3")
    if not isinstance(python, str) or not re.match(r"^[A-Za-z0-9._/-]{1,200}$", python):
        raise SettingsError("vm_python", "must be a command name or absolute path")
    clouds_yaml = raw.get("clouds_yaml") or ""
    if clouds_yaml and (not isinstance(clouds_yaml, str) or not clouds_yaml.startswith("/")):
        raise SettingsError("clouds_yaml", "must be an absolute path to a clouds.yaml")
    auth_url = raw.get("auth_url") or ""
    if auth_url and (not isinstance(auth_url, str) or not re.match(r"^https?://\S+$", auth_url)):
        raise SettingsError("auth_url", "must be the Keystone URL, e.g. https://keystone:5000/v3")
    auth = {k: _opt_name(raw, k, k.replace("_", " ")) for k in AUTH_FIELDS if k != "auth_url"}
    if not raw.get("cloud") and not auth_url:
        raise SettingsError(
            "cloud",
            "give cloud (an entry of clouds.yaml) or auth_url with an application credential "
            "id (or username and project) and the secret in the backend's secrets",
        )
    return {
        "auth_url": auth_url,
        **auth,
        "cloud": _opt_name(raw, "cloud", "cloud (a clouds.yaml entry)"),
        "clouds_yaml": clouds_yaml,
        "region": _opt_name(raw, "region", "region"),
        "flavor": _opt_name(raw, "flavor", "flavor"),
        "image": _opt_name(raw, "image", "image"),
        "network": network,
        "security_groups": groups,
        "key_name": _opt_name(raw, "key_name", "key pair"),
        "availability_zone": _opt_name(raw, "availability_zone", "availability zone"),
        "boot_timeout": _num(raw, "boot_timeout", 900, 5, 86_400),
        "leak_grace": _num(raw, "leak_grace", 300, 0, 86_400),
        "api_timeout": _num(raw, "api_timeout", 30, 1, 600),
        "min_disk_gb": _num(raw, "min_disk_gb", 0, 0, 100_000),
        # multi-node stacks (heat.py): shared volume size (0: none; needs Cinder) and how
        # long the head waits for its workers
        "volume_size_gb": int(_num(raw, "volume_size_gb", 0, 0, 65_536)),
        "worker_wait": int(_num(raw, "worker_wait", 900, 30, 86_400)),
        "vm_work_root": work_root.rstrip("/"),
        "vm_python": python,
    }
