"""What a study's progress tells a user: completed, failed and cancelled runs apart (an
ended run is not a success), a cancelled study as cancelled, counted by one grouped query."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from studies.models import Run

SPEC = {
    "name": "cavity sweep",
    "template": "cavity",
    "parameters": {"lid_velocity": {"values": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}},
}


def submit(api, name: str = "sweep") -> dict:
    r = api.post("/api/v1/studies/", {**SPEC, "name": name}, format="json")
    assert r.status_code == 201, r.json()
    return r.json()


def test_a_cancelled_study_says_so_and_counts_what_ended_each_way_apart(api):
    study = submit(api)
    runs = Run.objects.filter(study_id=study["id"]).order_by("index")
    Run.objects.filter(pk__in=[r.pk for r in runs[:3]]).update(state="completed")
    Run.objects.filter(pk=runs[3].pk).update(state="failed")
    r = api.post(f"/api/v1/studies/{study['id']}/cancel/")
    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["state"] == "cancelled"
    progress = body["progress"]
    assert (progress["completed"], progress["failed"], progress["cancelled"]) == (3, 1, 6)
    assert progress["active"] == 0 and progress["total"] == 10
    # every run ended, but not every run succeeded: `done` says ended, not success
    assert progress["done"] == 10 and progress["completed"] / progress["total"] == 0.3
    listed = api.get("/api/v1/studies/").json()["results"][0]
    assert listed["state"] == "cancelled" and listed["progress"] == progress


def test_the_study_list_counts_every_studys_runs_in_one_query(api):
    for i in range(3):
        submit(api, f"s{i}")
    with CaptureQueriesContext(connection) as one:
        api.get("/api/v1/studies/?page_size=1")
    with CaptureQueriesContext(connection) as three:
        page = api.get("/api/v1/studies/?page_size=3").json()
    assert len(three) == len(one)  # not a query per study
    assert [s["progress"]["active"] for s in page["results"]] == [10, 10, 10]
    counting = [q["sql"] for q in three if "GROUP BY" in q["sql"]]
    assert len(counting) == 1 and '"studies_study"' not in counting[0].split("FROM")[1]
