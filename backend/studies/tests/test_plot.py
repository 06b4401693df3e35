"""The objective plot's data (studies/plot.py, `GET /studies/{id}/plot/`): every point of a
small study, a summary per x bin computed in SQL above `max_points`, a heat map of two
parameters, clear 400s for names the study does not have, and walls between tenants."""

from __future__ import annotations

from typing import Any

import pytest

from studies.models import Run

SPEC: dict[str, Any] = {
    "name": "grid",
    "template": "cavity",
    "parameters": {
        "lid_velocity": {"values": [1, 2, 3, 4]},
        "nu": {"values": [0.01, 0.02]},
    },
    "objectives": {"Cl": {"series": "residual.p", "reduce": "last"}},
}


def make_study(api, spec=SPEC) -> dict:
    r = api.post("/api/v1/studies/", spec, format="json")
    assert r.status_code == 201, r.json()
    return r.json()


def finish(study_id: str, *, skip: tuple[int, ...] = ()) -> dict[int, float]:
    """Runs completed with Cl = velocity + 100·nu (the ones in `skip` stay queued)."""
    values = {}
    for run in Run.objects.filter(study_id=study_id).order_by("index"):
        if run.index in skip:
            continue
        cl = run.parameters["lid_velocity"] + 100 * run.parameters["nu"]
        run.state, run.trust, run.objectives = "completed", "converged", {"Cl": cl}
        run.save()
        values[run.index] = cl
    return values


def plot(api, study_id: str, **query):
    return api.get(f"/api/v1/studies/{study_id}/plot/", query)


def test_a_small_study_answers_every_point_with_its_run(api):
    study = make_study(api)
    values = finish(study["id"], skip=(7,))
    r = plot(api, study["id"], x="param.lid_velocity", y="objective.Cl", color="param.nu")
    assert r.status_code == 200, r.json()
    data = r.json()
    assert data["mode"] == "points"
    assert data["total"] == 7  # the queued run has no Cl yet
    assert data["last_seq"] == api.get(f"/api/v1/studies/{study['id']}/").json()["last_seq"]
    points = data["points"]
    by_index = dict(
        zip(
            points["index"],
            zip(points["x"], points["y"], points["color"], strict=True),
            strict=True,
        )
    )
    runs = {r.index: r for r in Run.objects.filter(study_id=study["id"])}
    assert by_index == {
        i: (runs[i].parameters["lid_velocity"], pytest.approx(cl), runs[i].parameters["nu"])
        for i, cl in values.items()
    }
    assert dict(zip(points["index"], points["run"], strict=True)) == {
        i: str(runs[i].id) for i in values
    }
    assert set(points["state"]) == {"completed"} and set(points["trust"]) == {"converged"}
    # sorted by colour, then x: ready to draw as lines
    assert points["color"] == sorted(points["color"])
    assert data["groups"] == [] and data["heatmap"] is None


def test_the_plot_takes_the_runs_lists_filters(api):
    study = make_study(api)
    finish(study["id"])
    r = plot(api, study["id"], x="param.lid_velocity", y="objective.Cl", param="lid_velocity:2..3")
    assert sorted(r.json()["points"]["x"]) == [2, 2, 3, 3]
    r = plot(api, study["id"], x="param.lid_velocity", y="objective.Cl", state="pending")
    assert r.json()["total"] == 0


def test_above_max_points_it_answers_the_mean_min_and_max_per_x_value(api):
    study = make_study(api)
    finish(study["id"])
    r = plot(api, study["id"], x="param.lid_velocity", y="objective.Cl", max_points=3)
    data = r.json()
    assert data["mode"] == "binned" and data["total"] == 8 and data["points"] is None
    # four values of x (fewer than the bins): one bin per value, both nu in each
    [group] = data["groups"]
    assert group["color"] is None
    assert [
        (b["x"], b["x_low"], b["count"], b["mean"], b["min"], b["max"]) for b in group["bins"]
    ] == [
        (v, None, 2, pytest.approx(v + 1.5), pytest.approx(v + 1), pytest.approx(v + 2))
        for v in (1, 2, 3, 4)
    ]


def test_binned_with_a_colour_answers_a_group_per_colour(api):
    study = make_study(api)
    finish(study["id"])
    data = plot(
        api, study["id"], x="param.lid_velocity", y="objective.Cl", color="param.nu", max_points=2
    ).json()
    assert [g["color"] for g in data["groups"]] == [0.01, 0.02]
    for group, nu in zip(data["groups"], (0.01, 0.02), strict=True):
        assert [b["count"] for b in group["bins"]] == [1, 1, 1, 1]
        assert [b["mean"] for b in group["bins"]] == pytest.approx(
            [v + 100 * nu for v in (1, 2, 3, 4)]
        )


def test_many_x_values_are_cut_into_equal_ranges(api):
    spec = {**SPEC, "parameters": {"lid_velocity": {"values": list(range(1, 11))}}}
    study = make_study(api, spec)
    for run in Run.objects.filter(study_id=study["id"]):
        v = run.parameters["lid_velocity"] - 1
        run.state, run.objectives = "completed", {"Cl": float(v * v)}
        run.save()
    data = plot(
        api, study["id"], x="param.lid_velocity", y="objective.Cl", max_points=5, bins=3
    ).json()
    [group] = data["groups"]
    bins = [(b["x_low"], b["x_high"], b["count"], b["min"], b["max"]) for b in group["bins"]]
    # 1..10 in three ranges of 3: [1,4) [4,7) [7,10] (the top value in the last range)
    assert bins == [
        (1, 4, 3, 0, 4),
        (4, 7, 3, 9, 25),
        (7, 10, 4, 36, 81),
    ]
    assert [b["x"] for b in group["bins"]] == [2.5, 5.5, 8.5]
    assert group["bins"][2]["mean"] == pytest.approx((36 + 49 + 64 + 81) / 4)


def test_a_heat_map_of_two_parameters_averages_the_objective_per_cell(api):
    study = make_study(api)
    values = finish(study["id"], skip=(0,))
    data = plot(
        api, study["id"], mode="heatmap", x="param.lid_velocity", y="param.nu", z="objective.Cl"
    ).json()
    assert data["mode"] == "heatmap" and data["total"] == 7
    heat = data["heatmap"]
    assert heat["x"] == [1, 2, 3, 4] and heat["y"] == [0.01, 0.02]
    assert heat["x_edges"] is None
    runs = {r.index: r.parameters for r in Run.objects.filter(study_id=study["id"])}
    expected = [[None] * 4 for _ in range(2)]
    counts = [[0] * 4 for _ in range(2)]
    for i, cl in values.items():
        row, col = heat["y"].index(runs[i]["nu"]), heat["x"].index(runs[i]["lid_velocity"])
        expected[row][col], counts[row][col] = pytest.approx(cl), 1
    assert heat["mean"] == expected
    assert heat["count"] == counts
    assert None in heat["mean"][0] or None in heat["mean"][1]  # the queued run's cell


def test_a_heat_map_averages_runs_that_share_a_cell(api):
    spec = {
        **SPEC,
        "parameters": {**SPEC["parameters"], "cells": {"values": [20, 30, 40]}},
    }
    study = make_study(api, spec)
    finish(study["id"])
    heat = plot(
        api, study["id"], mode="heatmap", x="param.lid_velocity", y="param.nu", z="objective.Cl"
    ).json()["heatmap"]
    assert heat["count"] == [[3] * 4, [3] * 4]  # cells vary within each cell
    assert heat["mean"][1][0] == pytest.approx(1 + 2)


@pytest.mark.parametrize(
    "query, field, needle",
    [
        ({"y": "objective.Cl"}, "x", "x is required: one of param."),
        ({"x": "param.speed", "y": "objective.Cl"}, "x", "no parameter 'speed' (it has: param."),
        ({"x": "param.nu", "y": "objective.Cd"}, "y", "no objective 'Cd'"),
        ({"x": "nu", "y": "objective.Cl"}, "x", "write param.NAME or objective.NAME"),
        ({"x": "param.nu", "y": "objective.Cl", "color": "param.U"}, "color", "no parameter 'U'"),
        ({"x": "param.nu", "y": "param.lid_velocity", "mode": "heatmap"}, "z", "needs z"),
        ({"x": "param.nu", "y": "objective.Cl", "mode": "cloud"}, "mode", "cloud"),
        ({"x": "param.nu", "y": "objective.Cl", "max_points": "many"}, "max_points", "integer"),
        ({"x": "param.nu", "y": "objective.Cl", "max_points": 0}, "max_points", "1"),
        ({"x": "param.nu", "y": "objective.Cl", "bins": 1000}, "bins", "200"),
        ({"x": "param.nu", "y": "objective.Cl", "param": "U:1..2"}, "param", "no parameter 'U'"),
        ({"x": "param.nu", "y": "objective.Cl", "state": "asleep"}, "state", "asleep"),
    ],
)
def test_a_bad_query_is_a_400_naming_the_field_and_what_exists(api, query, field, needle):
    study = make_study(api)
    r = plot(api, study["id"], **query)
    assert r.status_code == 400, r.json()
    body = r.json()
    assert body["field"] == field, body
    assert needle in body["message"], body
    if field == "x":  # what exists is listed
        assert all(n in body["message"] for n in ("param.nu", "param.lid_velocity", "objective.Cl"))


def test_another_tenants_study_is_not_found(api, make_tenant):
    study = make_study(api)
    finish(study["id"])
    other = make_tenant()
    api.force_authenticate(other.user)
    r = plot(api, study["id"], x="param.nu", y="objective.Cl")
    assert r.status_code == 404
    assert "Cl" not in str(r.json())


def test_the_plot_of_many_runs_is_a_few_statements(api, django_assert_max_num_queries):
    spec = {
        **SPEC,
        "parameters": {
            "lid_velocity": {"values": list(range(1, 41))},
            "nu": {"values": [0.01, 0.02, 0.03]},
        },
    }
    study = make_study(api, spec)
    Run.objects.filter(study_id=study["id"]).update(state="completed", objectives={"Cl": 1.0})
    with django_assert_max_num_queries(12):  # session, tenant, study, seq, counts, bins
        data = plot(
            api,
            study["id"],
            x="param.lid_velocity",
            y="objective.Cl",
            color="param.nu",
            max_points=10,
            bins=8,
        ).json()
    assert data["mode"] == "binned"
    assert [sum(b["count"] for b in g["bins"]) for g in data["groups"]] == [40, 40, 40]
    assert all(len(g["bins"]) == 8 for g in data["groups"])
