"""Secrets at rest (backend credentials, SSH keys): Fernet, keys from the settings.

`WINDTUNNEL_SECRETS_KEY` (a Fernet key; scripts/bootstrap makes one per installation)
encrypts stored secrets. Without it a key derived from SECRET_KEY does, as it did before the
setting existed (check --deploy warns: rotating SECRET_KEY would then lose the secrets).

Decryption also takes the older keys, so an installation keeps reading what it stored before
a key changed: `SECRETS_KEY_FALLBACKS` (earlier Fernet keys) and the keys derived from the
current SECRET_KEY, from SECRET_KEY_FALLBACKS and from `LEGACY_SECRET_KEYS` (SECRET_KEYs
that once encrypted credentials but sign nothing now). `reencrypt` moves a token to the
current key (`manage.py reencrypt_secrets`).
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from core.exceptions import ApplicationError


def key_derived_from(secret_key: str) -> str:
    """The Fernet key that `secret_key` stands for when no WINDTUNNEL_SECRETS_KEY is set."""
    digest = hashlib.sha256(("windtunnel-secrets:" + secret_key).encode()).digest()
    return base64.urlsafe_b64encode(digest).decode()


def _keys() -> list[str]:
    """The current key first (it encrypts), then every older key that still decrypts."""
    conf = settings.WINDTUNNEL
    derived = [
        key_derived_from(k)
        for k in [
            settings.SECRET_KEY,
            *settings.SECRET_KEY_FALLBACKS,
            *(conf.get("LEGACY_SECRET_KEYS") or []),
        ]
        if k
    ]
    keys = [conf.get("SECRETS_KEY") or "", *(conf.get("SECRETS_KEY_FALLBACKS") or []), *derived]
    return list(dict.fromkeys(k for k in keys if k))


def _fernet() -> MultiFernet:
    return MultiFernet([Fernet(k.encode()) for k in _keys()])


def encrypt_json(value: dict[str, Any]) -> str:
    if not value:
        return ""
    return _fernet().encrypt(json.dumps(value).encode()).decode()


def _undecryptable() -> ApplicationError:
    return ApplicationError(
        "stored secrets cannot be decrypted (WINDTUNNEL_SECRETS_KEY or SECRET_KEY changed, "
        "and the old one is not among the fallbacks); enter them again"
    )


def decrypt_json(token: str) -> dict[str, Any]:
    if not token:
        return {}
    try:
        return json.loads(_fernet().decrypt(token.encode()))
    except InvalidToken as exc:
        raise _undecryptable() from exc


def reencrypt(token: str) -> str:
    """The same secrets encrypted with the current key (from any key that still decrypts)."""
    if not token:
        return ""
    try:
        return _fernet().rotate(token.encode()).decode()
    except InvalidToken as exc:
        raise _undecryptable() from exc
