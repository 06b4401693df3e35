"""The telemetry batch's quick check accepts only what the agent messages' schema accepts."""

import pytest

from core.exceptions import ApplicationError
from core.schemas import validate
from ingest.api.envelope import plain_telemetry_batch
from ingest.api.views import AGENT_MESSAGES

AGENT_BATCH = {
    "attempt": 2,
    "series": {},
    "log": [],
    "phase": "solving",
    "resources": {"cpu_percent": 97.5, "rss_bytes": 2_000_000},
    "iterations": 199,
}


def schema_accepts(envelope) -> bool:
    try:
        validate(AGENT_MESSAGES, envelope, definition="TelemetryBatch")
    except ApplicationError:
        return False
    return True


def test_the_agents_own_batch_takes_the_quick_path():
    assert plain_telemetry_batch(AGENT_BATCH) and schema_accepts(AGENT_BATCH)
    assert plain_telemetry_batch({"attempt": 1})


@pytest.mark.parametrize(
    ("change", "quick"),
    [
        ({"attempt": 0}, False),
        ({"attempt": 2**31}, False),
        ({"attempt": True}, False),
        ({"attempt": 2.0}, False),  # an integer to the schema: the quick path leaves it to it
        ({"attempt": "2"}, False),
        ({"attempt": None}, False),
        ({"series": []}, False),
        ({"series": "x"}, False),
        ({"log": "line"}, False),
        ({"phase": "x" * 41}, False),
        ({"phase": "x" * 40}, True),
        ({"phase": "sol\x00ving"}, False),
        ({"phase": 3}, False),
        ({"iterations": -1}, False),
        ({"iterations": 2**31}, False),
        ({"iterations": 0}, True),
        ({"iterations": False}, False),
        ({"resources": []}, False),
        ({"resources": {"cpu_percent": "high"}}, False),
        ({"resources": {"cpu_percent": True}}, False),
        ({"resources": {"cpu_percent": 5}}, True),
        ({"resources": {"rss_bytes": -1}}, False),
        ({"resources": {"rss_bytes": 2**63}}, False),
        ({"resources": {"rss_bytes": 2**63 - 1}}, True),
        ({"resources": {"rss_bytes": 1.5}}, False),
        ({"resources": {"disk_bytes": -1}}, False),
        ({"resources": {"disk_bytes": 2**63}}, False),
        ({"resources": {"disk_bytes": "1G"}}, False),
        ({"resources": {"disk_bytes": 2**63 - 1}}, True),
        ({"resources": {"disk_bytes": 0}}, True),
        ({"resources": {"gpu": 1}}, True),
        ({"extra": 1}, False),
    ],
)
def test_the_quick_path_never_accepts_what_the_schema_refuses(change, quick):
    envelope = {**AGENT_BATCH, **change}
    assert plain_telemetry_batch(envelope) is quick
    if quick:
        assert schema_accepts(envelope), envelope


def test_without_attempt_or_not_an_object_it_is_the_schemas_to_refuse():
    assert not plain_telemetry_batch({"series": {}})
    assert not plain_telemetry_batch([AGENT_BATCH])
    assert not schema_accepts({"series": {}})
