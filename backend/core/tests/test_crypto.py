"""Stored secrets: encrypted with the installation's own key, and still readable after the
key changes (older keys decrypt until `reencrypt` moves a token to the current one)."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from core.crypto import decrypt_json, encrypt_json, key_derived_from, reencrypt
from core.exceptions import ApplicationError

OLD_PUBLIC = "local-development-only-not-secret"  # what `make run` once signed with
SECRETS = {"password": "hunter2"}


def use(settings, *, secret_key: str, secrets_key: str = "", legacy=(), fallbacks=()):
    settings.SECRET_KEY = secret_key
    settings.SECRET_KEY_FALLBACKS = []
    settings.WINDTUNNEL = {
        **settings.WINDTUNNEL,
        "SECRETS_KEY": secrets_key,
        "SECRETS_KEY_FALLBACKS": list(fallbacks),
        "LEGACY_SECRET_KEYS": list(legacy),
    }


def test_the_secrets_key_not_secret_key_encrypts(settings):
    own = Fernet.generate_key().decode()
    use(settings, secret_key="s" * 50, secrets_key=own)
    token = encrypt_json(SECRETS)
    assert Fernet(own.encode()).decrypt(token.encode())  # the installation's own key
    # a new SECRET_KEY (sessions) leaves the stored secrets readable
    use(settings, secret_key="t" * 50, secrets_key=own)
    assert decrypt_json(token) == SECRETS


def test_secrets_stored_under_the_old_public_key_still_decrypt_and_move_to_the_new_one(settings):
    use(settings, secret_key=OLD_PUBLIC)  # before: no secrets key, derived from SECRET_KEY
    old_token = encrypt_json(SECRETS)
    assert Fernet(key_derived_from(OLD_PUBLIC).encode()).decrypt(old_token.encode())
    own = Fernet.generate_key().decode()
    use(settings, secret_key="n" * 50, secrets_key=own, legacy=[OLD_PUBLIC])
    assert decrypt_json(old_token) == SECRETS
    new_token = reencrypt(old_token)
    assert Fernet(own.encode()).decrypt(new_token.encode())
    # with the legacy key gone, the moved token reads and the old one does not
    use(settings, secret_key="n" * 50, secrets_key=own)
    assert decrypt_json(new_token) == SECRETS
    with pytest.raises(ApplicationError, match="cannot be decrypted"):
        decrypt_json(old_token)


def test_a_rotated_secrets_key_decrypts_from_the_fallbacks(settings):
    first, second = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    use(settings, secret_key="s" * 50, secrets_key=first)
    token = encrypt_json(SECRETS)
    use(settings, secret_key="s" * 50, secrets_key=second, fallbacks=[first])
    assert decrypt_json(token) == SECRETS
    assert Fernet(second.encode()).decrypt(reencrypt(token).encode())
