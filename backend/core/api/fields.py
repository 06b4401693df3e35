"""Serializer fields typed in the OpenAPI schema by our JSON Schemas."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers


class SchemaField(serializers.JSONField):
    """A JSON value (a model's JSON column, a dict a service made) whose OpenAPI schema is
    `schema`: a JSON Schema node, usually a component of our schema files
    (`core.schemas.component_ref("ObjectiveSpec")`) or a map of them (`core.schemas.map_of`).
    The generated web client then types it instead of leaving it `unknown`."""

    def __init__(self, schema: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        extend_schema_field(schema)(self)
