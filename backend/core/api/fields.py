"""Serializer fields typed in the OpenAPI schema by our JSON Schemas."""

from __future__ import annotations

from typing import Any

from drf_spectacular.drainage import set_override
from rest_framework import serializers

# what types a SchemaField: a JSON Schema node, or a serializer documenting the dict's shape
Schema = dict[str, Any] | serializers.BaseSerializer | type[serializers.BaseSerializer]


class SchemaField(serializers.JSONField):
    """A JSON value (a model's JSON column, a dict a service made) passed through as it is,
    whose OpenAPI schema is `schema`: a JSON Schema node, usually a component of our schema
    files (`core.schemas.component_ref("ObjectiveSpec")`) or a map of them
    (`core.schemas.map_of`), or a serializer that documents a dict the portal makes. The
    generated web client then types it instead of leaving it `unknown`. `allow_null=True`
    adds the null to the schema."""

    def __init__(self, schema: Schema, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        set_override(self, "field", schema)  # what extend_schema_field does to a class
