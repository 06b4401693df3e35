"""Secrets at rest (backend credentials, SSH keys): Fernet, key from the environment.

`WINDTUNNEL_SECRETS_KEY` (a Fernet key) encrypts stored secrets; without it a key is
derived from SECRET_KEY, so rotating SECRET_KEY then needs the secrets re-entered.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

from core.exceptions import ApplicationError


def _fernet() -> Fernet:
    key = settings.WINDTUNNEL.get("SECRETS_KEY") or ""
    if not key:
        digest = hashlib.sha256(("windtunnel-secrets:" + settings.SECRET_KEY).encode()).digest()
        key = base64.urlsafe_b64encode(digest).decode()
    return Fernet(key.encode() if isinstance(key, str) else key)


def encrypt_json(value: dict[str, Any]) -> str:
    if not value:
        return ""
    return _fernet().encrypt(json.dumps(value).encode()).decode()


def decrypt_json(token: str) -> dict[str, Any]:
    if not token:
        return {}
    try:
        return json.loads(_fernet().decrypt(token.encode()))
    except InvalidToken as exc:
        raise ApplicationError(
            "stored secrets cannot be decrypted (WINDTUNNEL_SECRETS_KEY or SECRET_KEY changed); enter them again"
        ) from exc
