"""Previews of huge studies: their cost does not follow the run count where the space allows,
and each tenant may ask for so many a minute, without slowing another tenant down."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from catalog.models import Backend
from studies.models import Study
from tenancy import throttle
from tenancy.testing import TenantAPIClient

LID = [0.1 + i * 0.01 for i in range(1000)]
NU = [round(1e-4 + i * 1e-5, 10) for i in range(1000)]
MILLION: dict[str, Any] = {
    "name": "a million",
    "template": "cavity",
    "parameters": {"lid_velocity": {"values": LID}, "nu": {"values": NU}},
}


def preview(client, spec):
    return client.post("/api/v1/studies/preview/", spec, format="json")


def test_a_million_run_grid_is_previewed_with_its_count_and_first_rows(api):
    r = preview(api, MILLION)
    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["run_count"] == 1_000_000
    expected = list(itertools.islice(itertools.product(LID, NU), 20))
    assert [
        (row["parameters"]["lid_velocity"], row["parameters"]["nu"]) for row in body["rows"]
    ] == expected
    assert [row["index"] for row in body["rows"]] == list(range(20))
    # cavity's derived delta_t uses lid_velocity alone: its 1,000 values are every run's
    assert body["checked_runs"] == 1_000_000
    assert body["rows"][0]["context"]["delta_t"] == pytest.approx(0.5 * (0.1 / 20) / 0.1)
    assert body["quota"]["total"]["cores"] == 1_000_000
    assert Study.objects.count() == 0


def test_a_million_run_preview_still_finds_a_problem_in_its_last_runs(api):
    """The values are checked per parameter and per combination of what derived values use,
    not run by run: a bad value or a derived value that fails far down the grid is still a
    400 naming it (and the run)."""
    too_viscous = {**MILLION["parameters"], "nu": {"values": [*NU[:-1], 2.0]}}
    r = preview(api, {**MILLION, "parameters": too_viscous})
    assert r.status_code == 400 and r.json()["field"] == "parameters.nu"
    assert "nu = 2.0 is above its maximum 1" in r.json()["message"]
    last = {**MILLION["parameters"], "lid_velocity": {"values": [*LID[:-1], 20.0]}}
    spec = {**MILLION, "parameters": last, "derived": {"slip": "1 / (lid_velocity - 20)"}}
    r = preview(api, spec)
    assert r.status_code == 400 and r.json()["field"] == "derived.slip", r.json()
    assert "run 999000 (lid_velocity=20.0, nu=0.0001)" in r.json()["message"]


def test_a_sampled_million_is_previewed_from_its_first_samples(api):
    spec = {
        "name": "sampled",
        "template": "cavity",
        "combine": "lhs",
        "samples": 1_000_000,
        "seed": 7,
        "parameters": {"lid_velocity": {"min": 0.5, "max": 5}},
    }
    body = preview(api, spec).json()
    assert body["run_count"] == 1_000_000 and len(body["rows"]) == 20
    assert body["checked_runs"] == 10_000  # the first ones; submission checks every run
    assert all(0.5 <= row["parameters"]["lid_velocity"] <= 5 for row in body["rows"])
    again = preview(api, spec).json()  # the seed's design
    assert again["rows"] == body["rows"]


@pytest.fixture
def one_minute(monkeypatch):
    """The clock held inside one minute: the burst below all counts in the same one."""
    monkeypatch.setattr(throttle, "clock", lambda: 1_800_000_000.0)


def test_a_burst_of_previews_from_one_tenant_is_throttled_and_another_is_not(
    api, make_tenant, settings, one_minute
):
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "PREVIEWS_PER_MINUTE": 3}
    small = {"name": "small", "template": "cavity"}
    colleague = TenantAPIClient()  # another client of the tenant: it counts for the tenant
    colleague.force_authenticate(api.tenant.user)
    answers = [preview(api, small).status_code for _ in range(2)]
    answers.append(preview(colleague, small).status_code)
    refused = preview(api, small)
    assert answers == [200, 200, 200]
    assert refused.status_code == 429 and refused.json()["code"] == "throttled"
    assert "too many previews from your tenant: at most 3 a minute" in refused.json()["message"]
    assert refused["Retry-After"] == "60"  # the minute's end
    draft = api.post("/api/v1/studies/", {**small, "draft": True}, format="json").json()
    assert api.get(f"/api/v1/studies/{draft['id']}/preview/").status_code == 429

    other = make_tenant()
    client = TenantAPIClient()
    client.force_authenticate(other.user)
    assert preview(client, small).status_code == 200


def test_a_run_the_backend_is_too_small_for_names_the_backend_not_the_quota(make_tenant, catalog):
    """The tenant's quota has room; the backend the study runs on has too few cores."""
    Backend.objects.create(name="small", kind="local", cores=2, memory_gb=16, max_nodes=1)
    client = TenantAPIClient()
    client.force_authenticate(make_tenant(cores=64, memory_gb=64).user)
    spec = {"name": "wide", "template": "cavity", "backend": "small", "resources": {"processes": 4}}
    quota = preview(client, spec).json()["quota"]
    assert quota["fits"] is False
    assert quota["refused_by"] == "backend small's 2 cores"
    assert quota["summary"].startswith("a single run does not fit backend small's 2 cores")
    assert quota["problem"] == (
        "one run needs 4 cores but backend small has 2; lower resources.processes or choose "
        "another backend"
    )
    # within the backend but over the quota: the quota is named
    client.force_authenticate(make_tenant(cores=1, memory_gb=64).user)
    quota = preview(client, {**spec, "resources": {"processes": 2}}).json()["quota"]
    assert quota["refused_by"] == "your quota of 1 core"
    assert "ask an admin to raise the quota" in quota["problem"]
    # a run that fits is refused by nothing
    quota = preview(client, {**spec, "resources": {"processes": 1}}).json()["quota"]
    assert quota["fits"] is True and quota["refused_by"] == ""
    assert quota["summary"] == (
        "1 run × 1 core: at most 1 at a time, set by your quota of 1 core; about 1 wave"
    )
