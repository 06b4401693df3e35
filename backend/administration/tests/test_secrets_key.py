"""Moving stored backend credentials to the installation's own key (`manage.py
reencrypt_secrets`, which scripts/run runs): what an older key encrypted is encrypted again
with WINDTUNNEL_SECRETS_KEY; what no configured key decrypts is named, and left as it is."""

from __future__ import annotations

from cryptography.fernet import Fernet
from django.core.management import call_command

from catalog.models import Backend
from core.crypto import decrypt_json, encrypt_json

OLD_PUBLIC = "local-development-only-not-secret"


def keys(settings, *, secret_key: str, secrets_key: str = "", legacy=()):
    settings.SECRET_KEY = secret_key
    settings.WINDTUNNEL = {
        **settings.WINDTUNNEL,
        "SECRETS_KEY": secrets_key,
        "SECRETS_KEY_FALLBACKS": [],
        "LEGACY_SECRET_KEYS": list(legacy),
    }


def test_reencrypt_secrets_moves_every_backend_to_the_current_key(db, settings, capsys):
    keys(settings, secret_key=OLD_PUBLIC)
    Backend.objects.create(
        name="old-cluster", kind="slurm", cores=8, memory_gb=8, secrets=encrypt_json({"a": "1"})
    )
    keys(settings, secret_key="x" * 50, secrets_key=Fernet.generate_key().decode())
    Backend.objects.create(
        name="lost", kind="slurm", cores=8, memory_gb=8, secrets=encrypt_json({"b": "2"})
    )
    own = Fernet.generate_key().decode()
    keys(settings, secret_key="n" * 50, secrets_key=own, legacy=[OLD_PUBLIC])

    call_command("reencrypt_secrets")

    moved = Backend.objects.get(name="old-cluster").secrets
    assert Fernet(own.encode()).decrypt(moved.encode())
    keys(settings, secret_key="n" * 50, secrets_key=own)  # the old key can go now
    assert decrypt_json(moved) == {"a": "1"}
    err = capsys.readouterr().err
    assert "backend lost: no configured key decrypts its secrets" in err
