"""The installation's keys: bootstrap makes its own once, and the settings a portal runs with
refuse a missing or publicly known SECRET_KEY; production passes `check --deploy`."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from config.keys import PUBLIC_SECRET_KEYS, secret_key_problem

ROOT = Path(__file__).resolve().parents[3]


def read_env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {k: v for k, v in pairs if not k.startswith("#")}


def test_bootstrap_makes_each_installation_its_own_private_keys_once(tmp_path):
    made = []
    for name in ("one", "two"):
        subprocess.run([ROOT / "scripts" / "generate-secrets", tmp_path / name], check=True)
        path = tmp_path / name / "secrets.env"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        keys = read_env_file(path)
        assert secret_key_problem(keys["SECRET_KEY"]) is None
        assert len(keys["SECRET_KEY"]) >= 50
        Fernet(keys["WINDTUNNEL_SECRETS_KEY"])  # a valid Fernet key
        made.append(keys)
    assert made[0]["SECRET_KEY"] != made[1]["SECRET_KEY"]
    assert made[0]["WINDTUNNEL_SECRETS_KEY"] != made[1]["WINDTUNNEL_SECRETS_KEY"]
    # run again (every bootstrap does), the installation keeps its keys
    subprocess.run([ROOT / "scripts" / "generate-secrets", tmp_path / "one"], check=True)
    assert read_env_file(tmp_path / "one" / "secrets.env") == made[0]


def test_the_data_directory_with_the_keys_is_not_committed():
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", ".data/secrets.env"], cwd=ROOT, check=False
    )
    assert ignored.returncode == 0


def django(settings_module: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    """A Django command (or, without args, start-up alone) in a process of its own."""
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings_module,
        "PYTHONPATH": f"{ROOT / 'backend'}:{ROOT}",
        **env,
    }
    command = (
        [sys.executable, str(ROOT / "manage.py"), *args]
        if args
        else [
            sys.executable,
            "-c",
            "import django; django.setup()",
        ]
    )
    return subprocess.run(
        command, cwd=ROOT, env=environment, capture_output=True, text=True, check=False
    )


REFUSED = [
    *(
        ("config.settings.production", k)
        for k in [*sorted(PUBLIC_SECRET_KEYS), "django-insecure-x"]
    ),
    ("config.settings.production", ""),
    ("config.settings.local", "local-development-only-not-secret"),
    ("config.settings.local", ""),
]


@pytest.mark.parametrize(("module", "key"), REFUSED)
def test_the_settings_a_portal_runs_with_refuse_a_known_or_missing_secret_key(module, key):
    done = django(module, SECRET_KEY=key)
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr
    assert "publicly known" in done.stderr or "not set" in done.stderr
    assert "scripts/bootstrap" in done.stderr


def test_a_publicly_known_key_is_refused_among_the_fallbacks_too():
    done = django(
        "config.settings.production",
        SECRET_KEY=secrets.token_urlsafe(50),
        SECRET_KEY_FALLBACKS="local-development-only-not-secret",
    )
    assert done.returncode != 0 and "SECRET_KEY_FALLBACKS" in done.stderr


def production_env() -> dict[str, str]:
    """What a production deployment sets (.env.example)."""
    return {
        "SECRET_KEY": secrets.token_urlsafe(50),
        "WINDTUNNEL_SECRETS_KEY": Fernet.generate_key().decode(),
        "ALLOWED_HOSTS": "windtunnel.example.org",
        "CSRF_TRUSTED_ORIGINS": "https://windtunnel.example.org",
        "WINDTUNNEL_PUBLIC_URL": "https://windtunnel.example.org",
    }


def test_production_settings_pass_the_deployment_checks():
    done = django(
        "config.settings.production",
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        **production_env(),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_the_deployment_checks_ask_for_a_credentials_key_of_its_own():
    env = {**production_env(), "WINDTUNNEL_SECRETS_KEY": ""}
    done = django("config.settings.production", "check", "--deploy", **env)
    assert "windtunnel.W001" in done.stderr + done.stdout
