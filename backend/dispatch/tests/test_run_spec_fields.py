"""The study spec's `fields` (extra flow fields) are checked and reach the agent's run.json."""

from __future__ import annotations

import json

from dispatch.start import run_spec
from studies.models import Run
from studies.services import study_create


def test_the_specs_fields_are_checked_and_reach_the_agent(api):
    bad = api.post(
        "/api/v1/studies/",
        {"name": "bad fields", "template": "cavity", "fields": ["k; rm -rf /"]},
        format="json",
    )
    assert bad.status_code == 400
    error = bad.json()
    assert error["field"].startswith("fields") and "field name" in error["message"]
    study = study_create(
        tenant=api.tenant,
        owner=api.tenant.user,
        spec={"name": "k too", "template": "cavity", "fields": ["k", "nut"]},
        submit=True,
    )
    run = Run.objects.get(study=study)
    agent_spec = json.loads(run_spec(run=run, study=study, token="t").to_json())
    assert agent_spec["fields"] == ["k", "nut"]
