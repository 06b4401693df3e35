"""Fixtures of the dispatch tests."""

from __future__ import annotations

import pytest

from catalog.models import Backend


@pytest.fixture
def bench(db):
    """A backend that starts nothing (the no-op driver), with room for every run here."""
    return Backend.objects.update_or_create(
        name="bench", defaults={"kind": "noop", "cores": 64, "memory_gb": 256, "max_nodes": 1}
    )[0]


def submitted(api, spec) -> dict:
    """A study of `spec` created and submitted through the API: its JSON."""
    r = api.post("/api/v1/studies/", spec, format="json")
    assert r.status_code == 201, r.json()
    return r.json()
