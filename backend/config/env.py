"""The one place that reads the environment (django-environ)."""

from pathlib import Path

import environ

ROOT_DIR = Path(__file__).resolve().parents[2]
BACKEND_DIR = ROOT_DIR / "backend"

env = environ.Env()

# `.data/env` is written by scripts/bootstrap (private PostgreSQL/Redis); `.env` is the
# operator's own. Real environment variables win over both.
for candidate in (ROOT_DIR / ".env", ROOT_DIR / ".data" / "env"):
    if candidate.exists():
        environ.Env.read_env(str(candidate), overwrite=False)
