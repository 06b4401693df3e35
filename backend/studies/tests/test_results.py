"""A study's results as a user downloads them: results.csv and the JSON results, streamed in
pages from one cursor, with the same bytes as before they were streamed."""

from __future__ import annotations

import importlib
import json
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from studies import results
from studies.models import Run, Study

SPEC = {
    "name": "cavity sweep",
    "template": "cavity",
    "parameters": {"lid_velocity": {"values": [1, 2, 3, 4, 5, 6, 7]}},
}


def make_study(api) -> dict:
    r = api.post("/api/v1/studies/", SPEC, format="json")
    assert r.status_code == 201, r.json()
    study = r.json()
    runs = list(Run.objects.filter(study_id=study["id"]).order_by("index"))
    t0 = timezone.now()
    first = runs[0]
    first.state, first.trust, first.end_reason = "completed", "converged", "success"
    first.objectives = {name: 0.25 for name in study["objectives"]}
    first.iterations, first.attempt = 120, 1
    first.started_at, first.finished_at = t0, t0 + timedelta(seconds=1.5)
    first.peak_memory_bytes, first.cpu_seconds = 104_857_600, 1.2
    first.save()
    # a run with a parameter the spec does not name (an older study's extra axis, from
    # before extend refused new names), found by the migration that records such names
    runs[3].parameters = {**runs[3].parameters, "=evil": "=1+2"}
    runs[3].save(update_fields=["parameters"])
    migration = importlib.import_module("studies.migrations.0018_study_extra_parameter_names")
    with connection.schema_editor() as editor:
        migration.fill(apps, editor)
    return study


def body(response) -> bytes:
    assert response.status_code == 200
    assert response.streaming  # sent as it is read, not built whole first
    return b"".join(response.streaming_content)


def test_results_csv_is_streamed_in_pages_with_every_run_once_in_index_order(api, monkeypatch):
    monkeypatch.setattr(results, "PAGE", 3)  # 7 runs: three pages after the header
    study = make_study(api)
    r = api.get(f"/api/v1/studies/{study['id']}/results.csv")
    chunks = list(r.streaming_content)
    assert len(chunks) == 1 + 3  # the header goes out before any run is read
    lines = b"".join(chunks).decode().splitlines()
    objectives = study["objectives"]
    assert lines[0] == ",".join(
        ["run", "index", "lid_velocity", "=evil", "state", "trust", *objectives]
        + [f"partial.{o}" for o in objectives]
        + ["iterations", "wall_seconds", "end_reason", "reused_from"]
        + ["peak_memory_bytes", "cpu_seconds", "core_hours"]
    )
    assert [line.split(",")[1] for line in lines[1:]] == [str(i) for i in range(7)]
    ids = [
        str(i)
        for i in Run.objects.filter(study_id=study["id"])
        .order_by("index")
        .values_list("id", flat=True)
    ]
    assert lines[1] == ",".join(
        [ids[0], "0", "1", "", "completed", "converged", *["0.25"] * len(objectives)]
        + [""] * len(objectives)  # no partial values: it completed
        + ["120", "1.500", "success", ""]
        # what it used: its peak memory and CPU time as its agent measured them, and the
        # cores it held for the 1.5 s of its steps
        + ["104857600", "1.200", f"{Run.objects.get(pk=ids[0]).processes * 1.5 / 3600:.6f}"]
    )
    # the unnamed parameter is a column of its own, its formula-like value quoted
    assert lines[4] == ",".join(
        [ids[3], "3", "4", "'=1+2", "pending", "", *[""] * 2 * len(objectives), *[""] * 7]
    )


def test_json_results_stream_the_same_document_as_before(api, monkeypatch):
    monkeypatch.setattr(results, "PAGE", 2)
    study = make_study(api)
    raw = body(api.get(f"/api/v1/studies/{study['id']}/results/"))
    doc = json.loads(raw)
    assert list(doc) == ["study", "parameters", "objectives", "rows", "last_seq"]
    assert doc["study"] == study["id"] and doc["parameters"] == ["lid_velocity"]
    assert doc["objectives"] == list(study["objectives"]) and doc["last_seq"] == study["last_seq"]
    assert [row["index"] for row in doc["rows"]] == list(range(7))
    first = doc["rows"][0]
    assert first["wall_seconds"] == 1.5 and first["iterations"] == 120
    assert first["attempts"] == 1 and first["trust"] == "converged"
    assert (first["peak_memory_bytes"], first["cpu_seconds"]) == (104_857_600, 1.2)
    assert first["core_hours"] == pytest.approx(
        1.5 / 3600 * Run.objects.get(pk=first["run"]).processes
    )
    assert doc["rows"][3]["core_hours"] is None  # never started
    assert doc["rows"][3]["parameters"] == {"lid_velocity": 4, "=evil": "=1+2"}
    # compact, as DRF's renderer wrote it
    assert raw.startswith(b'{"study":"') and b'", "' not in raw


def test_an_empty_set_of_rows_is_still_a_whole_document(api):
    study = make_study(api)
    Run.objects.filter(study_id=study["id"]).delete()
    doc = json.loads(body(api.get(f"/api/v1/studies/{study['id']}/results/")))
    assert doc["rows"] == []
    text = body(api.get(f"/api/v1/studies/{study['id']}/results.csv")).decode()
    assert text.count("\n") == 1  # the header alone


def test_under_asgi_chunks_are_sent_one_by_one_as_they_are_read(api, monkeypatch):
    """Django's ASGI handler collects a synchronous stream whole before sending it; ours
    makes and sends one page at a time in the request's thread."""
    monkeypatch.setattr(results, "PAGE", 3)
    study = make_study(api)
    read: list[int] = []
    rows = results.study_result_rows

    def counting(*, study):
        for row in rows(study=study):
            read.append(row["index"])
            yield row

    monkeypatch.setattr(results, "study_result_rows", counting)
    response = api.get(f"/api/v1/studies/{study['id']}/results.csv")
    seen: list[int] = []  # how many rows had been read when each chunk arrived

    async def consume() -> None:
        async for _chunk in response:
            seen.append(len(read))

    async_to_sync(consume)()
    assert seen == [0, 3, 6, 7]


def test_a_study_whose_runs_carry_only_its_parameters_needs_no_scan_for_more(api):
    """The names come from the spec (and the names an old extension left, recorded once):
    a results download or plot of a large study does not walk its runs first."""
    r = api.post("/api/v1/studies/", SPEC, format="json")
    study_id = r.json()["id"]
    study = Study.objects.get(pk=study_id)
    assert study.extra_parameter_names == []
    with CaptureQueriesContext(connection) as queries:
        assert results.study_parameter_names(study) == ["lid_velocity"]
    assert len(queries) == 0
