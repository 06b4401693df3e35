"""What a web process makes at start-up, before its first request, not on it. Imported once
Django is set up (config/asgi.py; the benchmarks that stand in for a web process)."""

from __future__ import annotations

from core import jobs, live
from core.schemas import prepare
from ingest.api.views import AGENT_MESSAGES
from studies.spec import SPEC_SCHEMA


def web_process_warm_up() -> None:
    """The tasks a request hands to the worker and the broker connection they go through, the
    validators of the agents' messages and of the study spec, and the live courier: each made
    the first requests that needed it wait (20 runs starting at once send their first reports
    together; the first submission waited half a second for the spec's schema and the
    broker). Benchmarks that stand in for a web process call it too."""
    jobs.warm_up()
    prepare(AGENT_MESSAGES)
    prepare(SPEC_SCHEMA)
    live.warm_up()
