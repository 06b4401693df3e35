"""Shared benchmark plumbing: Django set-up, the BENCH line and the JSON result file.

Every benchmark compares against a baseline measured in the same run (machines here are
shared and noisy: ratios hold, absolute times do not).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def setup_django() -> None:
    sys.path[:0] = [str(ROOT / "backend"), str(ROOT)]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import logging

    import django

    django.setup()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("sync_catalog", verbosity=0)


def fresh_stack():
    """The portal's processes on the bench database, with no stale tasks queued from earlier runs."""
    import redis
    from django.conf import settings

    from core.stack import Stack

    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    return Stack()


def emit(name: str, value: float, unit: str, context: str, **extra: Any) -> None:
    """Print the one final BENCH line and write bench/results/<name>.json."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    record = {
        "name": name,
        "value": value,
        "unit": unit,
        "context": context,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": f"{platform.node()} {os.cpu_count()} cores {platform.machine()}",
        **extra,
    }
    (RESULTS / f"{name}.json").write_text(json.dumps(record, indent=2, default=str))
    print(f"BENCH {name} {value:.4g} {unit} {context}", flush=True)


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)
