"""What an agent sends, as the ingest tests send it, and what a run has stored of it."""

from telemetry.models import LogChunk, SeriesChunk

POINTS = {"residual.Ux": [[1, 0.5], [2, 0.25]], "residual.p": [[1, 1.0], [2, 0.75]]}


def send_report(client, run_id, endpoint, body):
    """POST `body` to the run's ingest `endpoint` (telemetry, heartbeat, running, state)."""
    return client.post(f"/api/v1/ingest/runs/{run_id}/{endpoint}/", body, format="json")


def send_telemetry(client, run_id, *, attempt=2, series=None, log=None):
    body = {"attempt": attempt, "series": series or {}, "log": log or []}
    return send_report(client, run_id, "telemetry", body)


def send_numbered(client, run_id, seq, *, attempt=2, series=None, log=None, **fields):
    """A telemetry batch with its number (`batch_seq`): one sent again is stored once."""
    body = {"attempt": attempt, "batch_seq": seq, "series": series or {}, "log": log or []}
    return send_report(client, run_id, "telemetry", {**body, **fields})


def send_final(client, run_id, *, attempt=2, state="completed", **batch):
    """The agent's final report; a completed run's exit code 0, any other's 1."""
    body = {"attempt": attempt, "state": state, "exit_code": 0 if state == "completed" else 1}
    return send_report(client, run_id, "state", {**body, **batch})


def stored_counts(run) -> tuple[int, int]:
    """How many series chunks and log chunks the run has stored."""
    return (
        SeriesChunk.objects.filter(run=run).count(),
        LogChunk.objects.filter(run=run).count(),
    )
