"""The ingest API's fixtures: a started run and its agent's client."""

from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import Backend
from studies.models import Run
from studies.services import study_create
from studies.transitions import hash_run_token, run_token


class AgentClient(APIClient):
    """An API client that reports as the run agent does: a report names its attempt in the
    URL too (`?attempt=N`, the body's), so the portal authenticates it before reading it."""

    def post(self, path: Any, data: Any = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(data, dict) and "attempt" in data and "?" not in str(path):
            path = f"{path}?attempt={data['attempt']}"
        return super().post(path, data, *args, **kwargs)


@pytest.fixture
def running(make_tenant, catalog):
    """A started run (attempt 2) on the no-op backend and its agent's client, holding the
    token the portal gives attempt 2 (studies.transitions.run_token)."""
    Backend.objects.update_or_create(
        name="noop", defaults={"kind": "noop", "cores": 64, "memory_gb": 256, "max_nodes": 1}
    )
    tenant = make_tenant()
    spec = {"name": "ingest", "template": "cavity", "backend": "noop"}
    study = study_create(tenant=tenant, owner=tenant.user, spec=spec, submit=True)
    run = Run.objects.get(study=study)
    token = run_token(run_id=run.pk, attempt=2)
    Run.objects.filter(pk=run.pk).update(
        state="running", attempt=2, token_hash=hash_run_token(token), started_at=timezone.now()
    )
    run.refresh_from_db()
    client = AgentClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return run, client


@pytest.fixture
def agent_of():
    """The client of the agent of a run's attempt (holding that attempt's token)."""

    def make(run: Run, attempt: int) -> AgentClient:
        client = AgentClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token(run_id=run.pk, attempt=attempt)}")
        return client

    return make


@pytest.fixture
def live_run(live) -> Run:
    """On the live stack: a run whose attempt 2 is running (its token is run_token(attempt=2));
    attempt 1 is over."""
    Backend.objects.update_or_create(
        name="noop", defaults={"kind": "noop", "cores": 64, "memory_gb": 256, "max_nodes": 1}
    )
    spec = {"name": "quick", "template": "cavity", "backend": "noop"}
    study = study_create(tenant=live.tenant, owner=live.tenant.user, spec=spec, submit=True)
    run = Run.objects.get(study=study)
    Run.objects.filter(pk=run.pk).update(
        state="running",
        attempt=2,
        token_hash=hash_run_token(run_token(run_id=run.pk, attempt=2)),
        started_at=timezone.now(),
    )
    return run
