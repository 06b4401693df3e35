"""JSON Schemas of the live messages (docs/live.md shows them; tests validate against them)."""

from __future__ import annotations

_point = {
    "type": "array",
    "prefixItems": [{"type": "number"}, {"type": ["number", "null"]}],
    "minItems": 2,
    "maxItems": 2,
}
_base = {
    "type": {"type": "string"},
    "id": {"type": "string", "format": "uuid"},
    "seq": {"type": "integer", "minimum": 0},
}

RUN_STATE = {
    "type": "object",
    "required": ["id", "index", "state", "attempt"],
    "properties": {
        "id": {"type": "string"},
        "index": {"type": "integer"},
        "parameters": {"type": "object"},
        "state": {
            "enum": [
                "pending",
                "admitted",
                "provisioning",
                "running",
                "completed",
                "failed",
                "cancelled",
            ]
        },
        "phase": {"type": "string"},
        "attempt": {"type": "integer"},
        "end_reason": {"type": "string"},
        "message": {"type": "string"},
        "trust": {"enum": ["", "converged", "not_converged", "iteration_limit", "diverged"]},
        "objectives": {"type": "object"},
        "wait_reason": {"type": "string"},
        "wait_detail": {"type": "string"},
        "iterations": {"type": ["integer", "null"]},
        "started_at": {"type": ["string", "null"]},
        "finished_at": {"type": ["string", "null"]},
    },
}

SCHEMAS: dict[str, dict] = {
    "subscribed": {
        "type": "object",
        "required": ["type", "id", "seq", "object"],
        "properties": {**_base, "object": {"enum": ["run", "study"]}},
    },
    "telemetry": {
        "type": "object",
        "required": ["type", "id", "seq", "attempt", "series", "log"],
        "properties": {
            **_base,
            "attempt": {"type": "integer", "minimum": 1},
            "series": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": _point},
            },
            "log": {"type": "array", "items": {"type": "string"}},
        },
        "additionalProperties": False,
    },
    "state": {
        "type": "object",
        "required": ["type", "id", "seq", "run"],
        "properties": {**_base, "run": RUN_STATE},
        "additionalProperties": False,
    },
    "runs": {
        "type": "object",
        "required": ["type", "id", "seq", "state", "progress", "runs"],
        "properties": {
            **_base,
            "state": {"type": "string"},
            "progress": {"type": "object", "additionalProperties": {"type": "integer"}},
            "runs": {"type": "array", "items": RUN_STATE},
        },
        "additionalProperties": False,
    },
    "study": {
        "type": "object",
        "required": ["type", "id", "seq", "state", "progress"],
        "properties": {**_base, "state": {"type": "string"}, "progress": {"type": "object"}},
        "additionalProperties": False,
    },
}


def validate(message: dict) -> None:
    """Raise jsonschema.ValidationError when a message does not match its type's schema."""
    import jsonschema

    schema = SCHEMAS.get(message.get("type", ""))
    if schema is None:
        raise jsonschema.ValidationError(f"unknown message type {message.get('type')!r}")
    jsonschema.validate(message, schema, cls=jsonschema.Draft202012Validator)
