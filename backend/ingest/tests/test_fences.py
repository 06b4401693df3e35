"""What the ingest API refuses, and what a refusal leaves behind.

A caller is authenticated first (401, telling nothing of the run), then fenced by the attempt
(409: the agent of an attempt that is over stops) and by the attempt's end (409 once its
final report is in). A report refused for what it holds is a 400 naming the field and what it
may be, and changes nothing; a final report is all or nothing.
"""

import pytest
from django.db import DatabaseError
from rest_framework.test import APIClient

from catalog.models import Backend
from core.jobs import Job
from ingest.tests.reports import send_report, stored_counts
from studies import transitions
from studies.models import Run
from studies.transitions import hash_run_token, run_token
from studies.usage import usage_for_tenant

POINTS = {"residual.p": [[1, 1.0], [2, 0.5]]}
INT32_MAX = 2**31 - 1


def _put_archive(client, run_id, data=b"\x1f\x8b archive", attempt="2"):
    return client.put(
        f"/api/v1/ingest/runs/{run_id}/archive/?attempt={attempt}",
        data,
        content_type="application/gzip",
    )


def _final(client, run_id, **fields):
    return send_report(client, run_id, "state", {"attempt": 2, "state": "completed", **fields})


def _on_local(run) -> None:
    """The run on a backend of the portal's own cores (they go back early: releases_early)."""
    local, _ = Backend.objects.update_or_create(
        name="fences-local", defaults={"kind": "local", "cores": 64, "memory_gb": 256}
    )
    Run.objects.filter(pk=run.pk).update(backend=local, handle="4194304:1.0")


def _cores_held(run) -> int:
    return usage_for_tenant(tenant_id=run.tenant_id).cores


@pytest.fixture
def archives(settings, tmp_path):
    settings.ARCHIVE_DIR = tmp_path / "archives"
    return settings.ARCHIVE_DIR


# --- a final report out of range, or failing on the way, changes nothing -------------------


@pytest.mark.parametrize(
    ("fields", "field", "needle"),
    [
        ({"iterations": 2**40}, "iterations", f"a whole number from 0 to {INT32_MAX}"),
        ({"exit_code": 2**31}, "exit_code", f"from -2147483648 to {INT32_MAX}"),
        ({"exit_code": -(2**31) - 1}, "exit_code", f"from -2147483648 to {INT32_MAX}"),
        ({"attempt": 2**31}, "attempt", f"a whole number from 1 to {INT32_MAX}"),
    ],
)
def test_a_final_report_out_of_range_is_a_400_naming_the_field_and_changes_nothing(
    running, fields, field, needle
):
    run, client = running
    _on_local(run)
    r = _final(client, run.pk, series=POINTS, log=["End"], **fields)
    assert r.status_code == 400, r.content
    assert r.json()["field"] == field and needle in r.json()["message"], r.json()
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.state, fresh.released_at) == ("running", None)  # its cores still count
    assert _cores_held(run) == run.processes
    assert stored_counts(run) == (0, 0)


def test_a_refused_final_report_ends_a_run_whose_cores_went_back_early(running, published):
    """Its `archiving` heartbeat gave the cores back; a final report that is then refused
    ends the attempt (failed, killed at once) rather than leave it running counted free."""
    run, client = running
    _on_local(run)
    beat = send_report(client, run.pk, "heartbeat", {"attempt": 2, "phase": "archiving"})
    assert beat.status_code == 200 and _cores_held(run) == 0
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION="Bearer not-the-token")
    # a stranger's report is refused before it is read, and ends nothing
    assert _final(stranger, run.pk, iterations=2**40).status_code == 401
    assert Run.objects.get(pk=run.pk).state == "running"
    r = _final(client, run.pk, iterations=2**40)
    assert r.status_code == 400 and r.json()["field"] == "iterations"
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.state, fresh.end_reason) == ("failed", "exit_code")
    assert fresh.message.startswith("the agent's final report was refused: iterations must be")
    assert (Job.KILL_RUN, (str(run.pk), 2, "4194304:1.0"), {"countdown": None}) in published.jobs
    assert _cores_held(run) == 0
    again = _final(client, run.pk)  # the attempt is over: its agent stops
    assert again.status_code == 409 and again.json()["code"] == "stale_attempt"


def test_a_database_error_in_a_final_report_leaves_the_run_as_it_was(running, monkeypatch):
    """The cores, the last batch and the state go in one transaction: a failure on the way
    gives no cores back and stores no points, and the agent's retry then goes through."""
    run, client = running
    _on_local(run)

    def fails(**kwargs):
        raise DatabaseError("the disk is full")

    monkeypatch.setattr(transitions, "run_end", fails)
    failing = APIClient(raise_request_exception=False)
    failing.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token(run_id=run.pk, attempt=2)}")
    assert _final(failing, run.pk, series=POINTS, log=["End"]).status_code == 500
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.state, fresh.released_at, fresh.results_at) == ("running", None, None)
    assert _cores_held(run) == run.processes
    assert stored_counts(run) == (0, 0)
    monkeypatch.undo()
    assert _final(client, run.pk, series=POINTS, log=["End"]).status_code == 200
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.state == "completed" and fresh.released_at is not None
    assert stored_counts(run) == (1, 1) and _cores_held(run) == 0


# --- once the final report is in, the attempt's token opens nothing -------------------------


def test_the_agents_order_stores_its_archive_and_then_the_token_opens_nothing(running, archives):
    """The agent (orchestration/agent/main.py): last points, `archiving`, the archive, the
    final report. After that report every call with the token is a 409 that says so, and
    neither the archive nor the points change."""
    run, client = running
    assert (
        send_report(client, run.pk, "telemetry", {"attempt": 2, "series": POINTS}).status_code
        == 200
    )
    assert (
        send_report(client, run.pk, "heartbeat", {"attempt": 2, "phase": "archiving"}).status_code
        == 200
    )
    assert _put_archive(client, run.pk, b"the results").status_code == 200
    assert _final(client, run.pk).status_code == 200
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.state == "completed" and fresh.archive_bytes == len(b"the results")
    target = archives / str(run.pk) / "attempt-2.tar.gz"
    refused = [
        send_report(client, run.pk, "telemetry", {"attempt": 2, "series": POINTS, "log": ["late"]}),
        send_report(client, run.pk, "heartbeat", {"attempt": 2, "phase": "solving"}),
        send_report(client, run.pk, "state", {"attempt": 2, "state": "running"}),
        _final(client, run.pk, series=POINTS),
        _put_archive(client, run.pk, b"someone else's"),
        client.get(f"/api/v1/ingest/runs/{run.pk}/case/?attempt=2"),
    ]
    for r in refused:
        assert r.status_code == 409, (r.request["PATH_INFO"], r.content)
        assert r.json()["code"] == "run_ended"
        assert "has ended (completed) and its final report is in" in r.json()["message"]
    assert target.read_bytes() == b"the results"
    assert Run.objects.get(pk=run.pk).archive_bytes == len(b"the results")
    assert stored_counts(run) == (1, 0)


def test_a_run_the_portal_ended_keeps_its_agents_last_words_until_its_final_report(
    running, archives
):
    """Cancelled (or stopped by a policy) while running: its agent's last points, archive
    and final report still come in, once; then the token opens nothing."""
    run, client = running
    Run.objects.filter(pk=run.pk).update(state="cancelled", stop_requested=True)
    r = send_report(client, run.pk, "telemetry", {"attempt": 2, "series": POINTS})
    assert r.status_code == 200 and r.json()["stop"] is True
    assert _put_archive(client, run.pk, b"partial results").status_code == 200
    assert _final(client, run.pk, state="cancelled", log=["stopped"]).status_code == 200
    assert stored_counts(run) == (1, 1)
    late = send_report(client, run.pk, "telemetry", {"attempt": 2, "series": POINTS})
    assert late.status_code == 409 and late.json()["code"] == "run_ended"
    assert _put_archive(client, run.pk, b"replaced").status_code == 409
    assert (archives / str(run.pk) / "attempt-2.tar.gz").read_bytes() == b"partial results"
    assert stored_counts(run) == (1, 1)


# --- no 500 on any input; a stranger learns nothing -----------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "body", "field", "needle"),
    [
        ("heartbeat", {"attempt": 2**31}, "attempt", f"from 1 to {INT32_MAX}, got 2147483648"),
        ("telemetry", {"attempt": 2**31}, "attempt", f"from 1 to {INT32_MAX}"),
        ("state", {"attempt": 2**31, "state": "running"}, "attempt", f"from 1 to {INT32_MAX}"),
        (
            "heartbeat",
            {"attempt": 2, "resources": {"rss_bytes": 1e30}},
            "resources.rss_bytes",
            "a whole number from 0 to 9223372036854775807, got 1e+30",
        ),
        (
            "heartbeat",
            {"attempt": 2, "phase": "solv\x00ing"},
            "phase",
            "without NUL characters",
        ),
        (
            "telemetry",
            {"attempt": 2, "series": {"residual.p\x00": [[1, 1.0]]}},
            "series",
            "series 'residual.p?': names must not contain NUL characters",
        ),
        (
            "state",
            {"attempt": 2, "state": "completed", "series": {"a\x00": [[1, 1.0]]}},
            "series",
            "names must not contain NUL characters",
        ),
    ],
)
def test_out_of_range_numbers_and_nul_characters_are_400s_naming_the_field(
    running, endpoint, body, field, needle
):
    run, client = running
    r = send_report(client, run.pk, endpoint, body)
    assert r.status_code == 400, r.content
    assert r.json()["field"] == field and needle in r.json()["message"], r.json()
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.state, fresh.phase, fresh.rss_bytes) == ("running", "", None)
    assert stored_counts(run) == (0, 0)


@pytest.mark.parametrize("attempt", ["2147483648", "0", "two"])
def test_an_archive_or_case_for_an_attempt_out_of_range_is_a_400_naming_it(
    running, archives, attempt
):
    run, client = running
    for r in (
        _put_archive(client, run.pk, attempt=attempt),
        client.get(f"/api/v1/ingest/runs/{run.pk}/case/?attempt={attempt}"),
    ):
        assert r.status_code == 400 and r.json()["field"] == "attempt", r.content
        assert "attempt" in r.json()["message"]


def test_a_nul_in_a_final_reports_message_is_dropped(running):
    """The message holds the last lines of a step's log, which a solver may have written
    anything into: its NULs are dropped rather than the report refused."""
    run, client = running
    r = _final(client, run.pk, state="failed", exit_code=1, message="FOAM\x00 FATAL ERROR")
    assert r.status_code == 200, r.content
    assert Run.objects.get(pk=run.pk).message == "FOAM FATAL ERROR"


@pytest.mark.parametrize("attempt", [1, 2, 3])
@pytest.mark.parametrize("header", [None, "Bearer not-the-token"])
def test_a_stranger_is_401_whatever_attempt_it_names(running, archives, header, attempt):
    """Before: a stale attempt answered 409 before the token was checked, which told anyone
    that the run existed and its attempt number."""
    run, _ = running
    stranger = APIClient()
    if header:
        stranger.credentials(HTTP_AUTHORIZATION=header)
    answers = [
        send_report(stranger, run.pk, "heartbeat", {"attempt": attempt}),
        send_report(stranger, run.pk, "telemetry", {"attempt": attempt, "series": POINTS}),
        send_report(stranger, run.pk, "state", {"attempt": attempt, "state": "running"}),
        send_report(stranger, run.pk, "state", {"attempt": attempt, "state": "completed"}),
        _put_archive(stranger, run.pk, attempt=str(attempt)),
        stranger.get(f"/api/v1/ingest/runs/{run.pk}/case/?attempt={attempt}"),
    ]
    for r in answers:
        assert r.status_code == 401, (r.request["PATH_INFO"], r.content)
        assert r.json() == {
            "code": "not_authenticated",
            "message": "missing or wrong run token",
            "field": None,
            "details": None,
        }
    assert stored_counts(run) == (0, 0)


def test_the_agent_of_an_earlier_attempt_is_told_to_stop(running, archives):
    """Attempt 2 was superseded by attempt 3: its agent, if still alive, holds attempt 2's
    token, which the portal recognises (run_token), and is told 409 (stop) on every call;
    attempt 2's token naming attempt 3 is a stranger's."""
    run, _ = running
    Run.objects.filter(pk=run.pk).update(
        attempt=3, token_hash=hash_run_token(run_token(run_id=run.pk, attempt=3))
    )
    old = APIClient()
    old.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token(run_id=run.pk, attempt=2)}")
    answers = [
        send_report(old, run.pk, "heartbeat", {"attempt": 2}),
        send_report(old, run.pk, "telemetry", {"attempt": 2, "series": POINTS}),
        send_report(old, run.pk, "state", {"attempt": 2, "state": "completed"}),
        _put_archive(old, run.pk, attempt="2"),
    ]
    for r in answers:
        assert r.status_code == 409 and r.json()["code"] == "stale_attempt", r.content
    assert send_report(old, run.pk, "heartbeat", {"attempt": 3}).status_code == 401
    assert stored_counts(run) == (0, 0)
