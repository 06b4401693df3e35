"""The common telemetry batch, recognised without the JSON Schema validator.

Every watched run's agent sends a batch every few tens of milliseconds, and walking the
agent messages' schema for each cost the request about a millisecond of CPU, more than
storing its points. `plain_telemetry_batch` accepts only envelopes the schema
(agent-messages.json, `$defs/TelemetryBatch`) accepts too, checked with a few type tests;
anything else (a float attempt, an unknown key, a long phase, …) goes through the schema,
which names the field of a 400. Its series and log lines are checked in bulk elsewhere
(telemetry.batches), as with the schema.
"""

from __future__ import annotations

from typing import Any

_KEYS = frozenset({"attempt", "batch_seq", "series", "log", "phase", "resources", "iterations"})
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
PHASE_MAX = 40


def _int_in(value: Any, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def plain_telemetry_batch(envelope: Any) -> bool:
    """True when the envelope (series and log already checked apart) is valid as it is;
    False means "ask the schema", not "invalid"."""
    if type(envelope) is not dict or not envelope.keys() <= _KEYS:
        return False
    if not _int_in(envelope.get("attempt"), 1, INT32_MAX):
        return False
    if "series" in envelope and type(envelope["series"]) is not dict:
        return False
    if "log" in envelope and type(envelope["log"]) is not list:
        return False
    if "phase" in envelope:
        phase = envelope["phase"]
        if type(phase) is not str or len(phase) > PHASE_MAX or "\x00" in phase:
            return False
    if "iterations" in envelope and not _int_in(envelope["iterations"], 0, INT32_MAX):
        return False
    if "batch_seq" in envelope and not _int_in(envelope["batch_seq"], 1, INT64_MAX):
        return False
    if "resources" in envelope:
        resources = envelope["resources"]
        if type(resources) is not dict:
            return False
        if "cpu_percent" in resources and type(resources["cpu_percent"]) not in (int, float):
            return False
        if "rss_bytes" in resources and not _int_in(resources["rss_bytes"], 0, INT64_MAX):
            return False
        if "disk_bytes" in resources and not _int_in(resources["disk_bytes"], 0, INT64_MAX):
            return False
    return True
