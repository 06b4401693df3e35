"""The ingest API's fixtures: a started run and its agent's client."""

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import Backend
from studies.models import Run
from studies.services import study_create
from studies.transitions import hash_run_token, run_token


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
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return run, client
