"""The live messages' schema (telemetry/schemas/live-messages.json) says what the streams
send: the web UI's client is typed from it, so its enums must be the models' choices."""

from __future__ import annotations

import pytest

from core.exceptions import ApplicationError
from core.schemas import load, validate
from studies.choices import EndReason, RunState, Trust, WaitReason
from telemetry.consumers import LIVE_MESSAGES


@pytest.mark.parametrize(
    "field, choices",
    [("state", RunState), ("trust", Trust), ("end_reason", EndReason), ("wait_reason", WaitReason)],
)
def test_a_live_runs_enums_are_the_runs_choices(field, choices):
    run = load(LIVE_MESSAGES)["$defs"]["LiveRun"]["properties"]
    assert run[field]["enum"] == [str(c) for c in choices.values]


def test_each_message_type_is_told_apart_by_its_type():
    defs = load(LIVE_MESSAGES)["$defs"]
    types = [
        defs[r["$ref"].rsplit("/", 1)[1]]["properties"]["type"]["const"]
        for r in defs["LiveMessage"]["oneOf"]
    ]
    assert sorted(types) == sorted(
        ["subscribed", "telemetry", "state", "runs", "study", "study.objectives", "pong"]
    )


def test_a_telemetry_event_validates_and_a_malformed_one_is_refused():
    event = {
        "type": "telemetry",
        "id": "7d1c2f1e-8a51-4b7e-9a53-0c6f4a1f2b3c",
        "seq": 4,
        "attempt": 1,
        "series": {"residual.p": [[0.1, 0.5], [0.2, None]]},
        "log": ["Time = 0.2"],
    }
    validate(LIVE_MESSAGES, event, definition="LiveMessage")
    with pytest.raises(ApplicationError):
        validate(
            LIVE_MESSAGES, {**event, "series": {"residual.p": [[0.1]]}}, definition="LiveMessage"
        )
