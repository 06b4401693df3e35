"""A study's runs table at any size: filters on state, trust, parameter and objective ranges,
sort by a column, a parameter or an objective, server-side; a runs list across studies; queue
positions counted for the page shown."""

from __future__ import annotations

import pytest

from catalog.models import Backend
from studies.choices import Priority
from studies.models import Run, Study

SPEC = {
    "name": "polar",
    "template": "cavity",
    "parameters": {"lid_velocity": {"values": [1, 2, 3, 4, 5, 6, 7, 8]}},
    "objectives": {"Cl": {"series": "residual.p", "reduce": "last"}},
}


def make_study(api, name="polar") -> dict:
    r = api.post("/api/v1/studies/", {**SPEC, "name": name}, format="json")
    assert r.status_code == 201, r.json()
    return r.json()


def finish(study_id: str) -> list[Run]:
    """Half the runs completed with Cl = velocity / 10 (a run with trust 'diverged' in between)."""
    runs = list(Run.objects.filter(study_id=study_id).order_by("index"))
    for run in runs[:4]:
        run.state = "completed"
        run.trust = "converged"
        run.objectives = {"Cl": run.parameters["lid_velocity"] / 10}
        run.save()
    runs[1].trust = "diverged"
    runs[1].save()
    return runs


def velocities(response) -> list:
    assert response.status_code == 200, response.json()
    return [r["parameters"]["lid_velocity"] for r in response.json()["results"]]


def test_runs_are_filtered_by_parameter_and_objective_ranges_and_trust(api):
    study = make_study(api)
    finish(study["id"])
    url = f"/api/v1/studies/{study['id']}/runs/"
    assert velocities(api.get(url, {"param": "lid_velocity:3..6"})) == [3, 4, 5, 6]
    assert velocities(api.get(url, {"param": "lid_velocity:..2"})) == [1, 2]
    assert velocities(api.get(url, {"param": "lid_velocity:7"})) == [7]
    # only runs with an objective in range: the queued ones have none
    assert velocities(api.get(url, {"objective": "Cl:0.15.."})) == [2, 3, 4]
    assert velocities(api.get(url, {"objective": "Cl:0.15..", "trust": "converged"})) == [3, 4]
    both = api.get(url, {"param": ["lid_velocity:2..8", "lid_velocity:..3"], "state": "completed"})
    assert velocities(both) == [2, 3]
    assert api.get(url, {"param": "lid_velocity:2..8"}).json()["count"] == 7


def test_runs_sort_by_objective_parameter_or_column_with_missing_values_last(api):
    study = make_study(api)
    finish(study["id"])
    url = f"/api/v1/studies/{study['id']}/runs/"
    assert velocities(api.get(url, {"ordering": "-objective.Cl"}))[:5] == [4, 3, 2, 1, 5]
    assert velocities(api.get(url, {"ordering": "objective.Cl"}))[:4] == [1, 2, 3, 4]
    assert velocities(api.get(url, {"ordering": "-param.lid_velocity"})) == [8, 7, 6, 5, 4, 3, 2, 1]
    # pages of a sorted list neither overlap nor skip (ties broken by id)
    pages = [
        velocities(api.get(url, {"ordering": "state", "page_size": 3, "page": n}))
        for n in (1, 2, 3)
    ]
    assert sorted(v for page in pages for v in page) == [1, 2, 3, 4, 5, 6, 7, 8]
    first = api.get(url, {"ordering": "state", "page_size": 3}).json()["results"]
    assert [r["state"] for r in first] == ["completed"] * 3
    # the heaviest runs first: by the peak memory their agents reported
    for run in Run.objects.filter(study_id=study["id"], state="completed"):
        run.peak_memory_bytes = int(run.parameters["lid_velocity"]) % 3 * 10**8
        run.save(update_fields=["peak_memory_bytes"])
    assert velocities(api.get(url, {"ordering": "-peak_memory_bytes"}))[:4] == [2, 1, 4, 3]


@pytest.mark.parametrize(
    "query, needle",
    [
        ({"param": "lid_velocity"}, "NAME:LOW..HIGH"),
        ({"param": "speed:1..2"}, "no parameter 'speed' (it has: lid_velocity)"),
        ({"param": "lid_velocity:a..2"}, "'a' is not a number"),
        ({"param": "lid_velocity:5..2"}, "low bound is above the high one"),
        ({"param": "lid_velocity:.."}, "at least one bound"),
        ({"objective": "Cd:..1"}, "no objective 'Cd' (it has: Cl)"),
        ({"ordering": "password"}, "cannot sort by 'password'"),
        ({"ordering": "param.speed"}, "no parameter 'speed'"),
        ({"trust": "great"}, "great"),
        ({"state": "sleeping"}, "sleeping"),
    ],
)
def test_a_malformed_filter_or_sort_is_a_400_that_says_how_to_write_it(api, query, needle):
    study = make_study(api)
    r = api.get(f"/api/v1/studies/{study['id']}/runs/", query)
    assert r.status_code == 400
    assert needle in str(r.json()), r.json()


def test_the_runs_list_across_studies_filters_by_study_and_sorts(api, make_tenant):
    first, second = make_study(api, "one"), make_study(api, "two")
    finish(second["id"])
    r = api.get("/api/v1/runs/", {"study": second["id"], "ordering": "-objective.Cl"})
    assert r.json()["count"] == 8
    assert {row["study"] for row in r.json()["results"]} == {second["id"]}
    assert velocities(r)[:4] == [4, 3, 2, 1]
    # across studies any name may be asked for: runs without it simply do not match
    assert api.get("/api/v1/runs/", {"param": "lid_velocity:8"}).json()["count"] == 2
    assert api.get("/api/v1/runs/", {"param": "speed:1..2"}).json()["count"] == 0
    assert api.get("/api/v1/runs/", {"study": "not-a-uuid"}).status_code == 400
    # another tenant's study filters to nothing, not to its runs
    other = make_tenant()
    Run.objects.filter(study_id=first["id"]).update(tenant=other)
    assert api.get("/api/v1/runs/", {"study": first["id"]}).json()["count"] == 0


def test_queue_positions_of_a_page_deep_in_the_queue_count_the_runs_ahead(api):
    first, second = make_study(api, "one"), make_study(api, "two")
    page = api.get(f"/api/v1/studies/{second['id']}/runs/", {"page_size": 3, "page": 2}).json()
    positions = [r["queue_position"] for r in page["results"]]
    assert positions == [8 + 4, 8 + 5, 8 + 6]  # all of study one is ahead
    # a page sorted another way still gets each run's own place
    page = api.get(
        f"/api/v1/studies/{first['id']}/runs/", {"ordering": "-index", "page_size": 2}
    ).json()
    assert [r["queue_position"] for r in page["results"]] == [8, 7]
    Run.objects.filter(study_id=first["id"], index__lt=3).update(state="running")
    page = api.get(f"/api/v1/studies/{second['id']}/runs/", {"page_size": 2}).json()
    assert [r["queue_position"] for r in page["results"]] == [6, 7]


def test_runs_across_studies_carry_their_studys_name_without_a_query_per_run(
    api, django_assert_max_num_queries
):
    make_study(api, "one"), make_study(api, "two")
    with django_assert_max_num_queries(8):
        rows = api.get("/api/v1/runs/", {"page_size": 16}).json()["results"]
    assert sorted({r["study_name"] for r in rows}) == ["one", "two"]
    study = make_study(api, "three")
    with django_assert_max_num_queries(8):
        rows = api.get(f"/api/v1/studies/{study['id']}/runs/").json()["results"]
    assert {r["study_name"] for r in rows} == {"three"}


def test_pages_of_a_studys_runs_in_their_order_are_index_ranges_to_the_last(api):
    """Unfiltered, in index order, a page is an index range and the count is the study's
    (studies/api/pagination.py): every run once, in order, to the last page, extension too."""
    study = make_study(api)
    r = api.post(
        f"/api/v1/studies/{study['id']}/extend/",
        {"parameters": {"lid_velocity": {"values": [9, 10, 11]}}},
        format="json",
    )
    assert r.status_code == 200, r.json()
    url = f"/api/v1/studies/{study['id']}/runs/"
    seen = []
    for page in (1, 2, 3):
        body = api.get(url, {"page_size": 4, "page": page}).json()
        assert body["count"] == 11
        seen += [(run["index"], run["parameters"]["lid_velocity"]) for run in body["results"]]
    assert seen == list(enumerate([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]))
    assert body["next"] is None and body["previous"] is not None
    # their queue positions are each run's place, the page's span only counted
    last = api.get(url, {"page_size": 4, "page": 3}).json()["results"]
    assert [run["queue_position"] for run in last] == [9, 10, 11]
    past = api.get(url, {"page_size": 4, "page": 4})
    assert past.status_code == 400 and past.json()["field"] == "page", past.json()
    assert "past the last page (3)" in past.json()["message"]
    # a filter pages the filtered set as before
    body = api.get(url, {"page_size": 4, "page": 2, "param": "lid_velocity:3.."}).json()
    assert body["count"] == 9
    assert [run["parameters"]["lid_velocity"] for run in body["results"]] == [7, 8, 9, 10]


def positions(api, study: dict) -> list:
    rows = api.get(f"/api/v1/studies/{study['id']}/runs/", {"page_size": 3}).json()["results"]
    return [r["queue_position"] for r in rows]


def test_queue_positions_count_only_the_runs_admission_takes_first_on_that_backend(api):
    """A run is next (#1) when what waits before it waits elsewhere: on another backend, in a
    cancelled study, or behind it by priority where the backend's policy goes by priority."""
    Backend.objects.create(name="other", kind="local", cores=2, memory_gb=8, max_nodes=1)
    first = make_study(api, "on local")
    elsewhere = make_study(api, "on other")
    Run.objects.filter(study_id=elsewhere["id"]).update(backend=Backend.objects.get(name="other"))
    assert positions(api, elsewhere) == [1, 2, 3]  # study one's 8 runs wait on local
    later = make_study(api, "later on local")
    assert positions(api, later) == [9, 10, 11]
    # a cancelled study's queued runs are being ended: nothing waits behind them
    Study.objects.filter(pk=first["id"]).update(state="cancelled")
    assert positions(api, later) == [1, 2, 3]
    Study.objects.filter(pk=first["id"]).update(state="submitted")
    # high priority first where the backend's policy takes priorities; fifo ignores them
    Run.objects.filter(study_id=later["id"]).update(priority=Priority.HIGH)
    assert positions(api, later) == [9, 10, 11]
    Backend.objects.filter(name="local").update(admission_policy="priority")
    assert positions(api, later) == [1, 2, 3]
    assert positions(api, first) == [9, 10, 11]
