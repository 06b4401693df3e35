"""Mesh independence: the grid convergence index of Celik et al. (2008), checked against the
paper's worked example and against a solution whose order is known exactly, then on a
study's runs through the API, with bad input answered 400 naming the field."""

from __future__ import annotations

import csv
import io

import pytest

from catalog.models import Backend
from core.exceptions import ApplicationError
from studies.gci import gci
from studies.models import Run
from studies.services import study_create


def test_the_papers_worked_example_gives_its_published_figures():
    """Celik et al. (2008), Table 1, first column: 18,000, 8,000 and 4,500 cells in 2-D."""
    g = gci([18000**-0.5, 8000**-0.5, 4500**-0.5], [6.063, 5.972, 5.863])
    assert (g.r21, round(g.r32, 3)) == (1.5, 1.333)
    assert round(g.p, 2) == 1.53
    assert round(g.phi_ext, 4) == 6.1685
    assert (round(100 * g.e_a, 1), round(100 * g.e_ext, 1)) == (1.5, 1.7)
    assert round(100 * g.gci_fine, 1) == 2.2
    assert g.in_asymptotic_range and not g.oscillatory


def test_a_solution_of_known_order_gives_that_order_and_its_limit():
    """φ(h) = 1 + 0.1 h², on h = 1, 2, 4: order 2 exactly, φ(0) = 1, and each figure as the
    formulas give it by hand."""
    g = gci([1, 2, 4], [1.1, 1.4, 2.6])
    assert g.p == pytest.approx(2, abs=1e-9)
    assert g.phi_ext == pytest.approx(1.0, abs=1e-9)
    assert g.e_a == pytest.approx(0.3 / 1.1)
    assert g.e_ext == pytest.approx(0.1)
    assert g.gci_fine == pytest.approx(1.25 * (0.3 / 1.1) / 3)
    assert g.gci_coarse == pytest.approx(1.25 * (1.2 / 1.4) / 3)


def test_oscillating_values_are_flagged_and_flat_ones_refused():
    assert gci([1, 2, 4], [1.0, 1.2, 1.1]).oscillatory
    with pytest.raises(ApplicationError, match="same on two neighbouring levels") as caught:
        gci([1, 2, 4], [1.0, 1.0, 1.3], field="cd")
    assert caught.value.field == "cd"


@pytest.fixture
def refined(api, catalog):
    """A cavity study over cells 10, 20, 40 (and 5, coarser) whose runs completed with
    u_min(h) = −0.2 + 3 h² (h = 1/cells) and a flat objective."""
    Backend.objects.update_or_create(
        name="gci", defaults={"kind": "noop", "cores": 64, "memory_gb": 256, "max_nodes": 1}
    )
    spec = {
        "name": "mesh",
        "template": "cavity",
        "backend": "gci",
        "reuse": False,
        "parameters": {"cells": {"values": [5, 10, 20, 40]}},
    }
    study = study_create(tenant=api.tenant, owner=api.tenant.user, spec=spec, submit=True)
    for run in study.runs.all():
        h = 1 / run.parameters["cells"]
        Run.objects.filter(pk=run.pk).update(
            state="completed", objectives={"u_min": -0.2 + 3 * h * h, "flat": 1.0}
        )
    return study


def test_a_studys_objectives_over_its_three_finest_levels(api, refined):
    r = api.get(f"/api/v1/studies/{refined.pk}/mesh-independence/?parameter=cells")
    assert r.status_code == 200, r.json()
    body = r.json()
    assert [level["value"] for level in body["levels"]] == [40, 20, 10]
    u = body["objectives"]["u_min"]
    assert u["p"] == pytest.approx(2, abs=1e-6)
    assert u["phi_ext"] == pytest.approx(-0.2, abs=1e-9)
    assert u["r21"] == pytest.approx(2) and not u["oscillatory"]
    assert "same on two neighbouring levels" in body["refused"]["flat"]


def test_the_answer_downloads_as_csv_one_row_per_objective(api, refined):
    r = api.get(f"/api/v1/studies/{refined.pk}/mesh-independence.csv?parameter=cells")
    assert r.status_code == 200
    assert r["Content-Type"].startswith("text/csv")
    assert 'filename="mesh-mesh-independence.csv"' in r["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(r.content.decode())))
    u, flat = rows
    # u_min(h) = −0.2 + 3 h² on h = 1/40, 1/20, 1/10: order 2, limit −0.2, by hand
    assert u["objective"] == "u_min" and u["refused"] == ""
    assert [float(u[k]) for k in ("h_fine", "h_medium", "h_coarse")] == [1 / 40, 1 / 20, 1 / 10]
    assert float(u["phi_fine"]) == pytest.approx(-0.2 + 3 / 1600)
    assert float(u["p"]) == pytest.approx(2, abs=1e-6)
    assert float(u["phi_ext"]) == pytest.approx(-0.2, abs=1e-9)
    e_a = abs((3 / 1600 - 3 / 400) / (-0.2 + 3 / 1600))
    assert float(u["gci_fine"]) == pytest.approx(1.25 * e_a / (2**2 - 1), rel=1e-6)
    assert u["oscillatory"] == "false"
    assert flat["objective"] == "flat" and flat["p"] == ""
    assert "same on two neighbouring levels" in flat["refused"]
    # the same checks as the JSON answer, and the same walls
    bad = api.get(f"/api/v1/studies/{refined.pk}/mesh-independence.csv?parameter=nope")
    assert bad.status_code == 400 and bad.json()["field"] == "parameter"


@pytest.mark.parametrize(
    ("query", "field", "words"),
    [
        ("parameter=lid_velocity", "parameter", "no completed run varies 'lid_velocity'"),
        ("parameter=cells&kind=volume", "kind", ""),
        ("", "parameter", ""),
    ],
)
def test_bad_queries_are_400s_naming_the_field(api, refined, query, field, words):
    r = api.get(f"/api/v1/studies/{refined.pk}/mesh-independence/?{query}")
    assert r.status_code == 400, r.json()
    error = r.json()
    assert error["field"] == field, error
    assert words in error["message"]


def test_fewer_than_three_levels_are_refused_with_what_to_do(api, refined):
    Run.objects.filter(study=refined, parameters__cells__in=[5, 10]).update(state="failed")
    r = api.get(f"/api/v1/studies/{refined.pk}/mesh-independence/?parameter=cells")
    assert r.status_code == 400
    assert r.json()["message"] == (
        "'cells' has 2 completed level(s); the procedure needs three or more (add finer or "
        "coarser levels)"
    )


def test_another_tenants_study_is_not_found(api, refined, make_tenant):
    from tenancy.testing import TenantAPIClient

    other = TenantAPIClient()
    other.force_authenticate(make_tenant().user)
    r = other.get(f"/api/v1/studies/{refined.pk}/mesh-independence/?parameter=cells")
    assert r.status_code == 404
    r = other.get(f"/api/v1/studies/{refined.pk}/mesh-independence.csv?parameter=cells")
    assert r.status_code == 404
