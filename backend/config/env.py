"""The one place that reads the environment (django-environ)."""

from pathlib import Path

import environ

ROOT_DIR = Path(__file__).resolve().parents[2]
BACKEND_DIR = ROOT_DIR / "backend"

env = environ.Env()

# `.data/env` is written by scripts/bootstrap (private PostgreSQL/Redis), `.data/secrets.env`
# once per installation by scripts/generate-secrets (SECRET_KEY, WINDTUNNEL_SECRETS_KEY);
# `.env` is the operator's own. Real environment variables win over all of them.
for candidate in (
    ROOT_DIR / ".env",
    ROOT_DIR / ".data" / "env",
    ROOT_DIR / ".data" / "secrets.env",
):
    if candidate.exists():
        environ.Env.read_env(str(candidate), overwrite=False)
