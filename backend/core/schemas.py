"""JSON Schemas that validate input, document it and type the generated API client.

One schema per shape (the study spec, the agent's messages): the API validates requests
with it, drf-spectacular publishes it as an OpenAPI 3.1 component (so the web UI's client is
typed from it), and the docs render their field tables from it (scripts/render_docs.py,
checked by `make lint`). What a schema refuses becomes an ApplicationError that names the
field and says what to write instead; a schema node may carry `x-error`, the message for any
problem at that node.
"""

from __future__ import annotations

import copy
import functools
import json
import reprlib
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from django.apps import apps as django_apps
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from core.exceptions import ApplicationError, ErrorCode

_TYPES = {
    "integer": "a whole number",
    "number": "a number",
    "string": "text",
    "boolean": "true or false",
    "object": "an object",
    "array": "a list",
    "null": "null",
}


@functools.cache
def load(path: str | Path) -> dict[str, Any]:
    """A schema file, read once and checked to be a valid JSON Schema (2020-12)."""
    schema: dict[str, Any] = json.loads(Path(path).read_text())
    Draft202012Validator.check_schema(schema)
    return schema


_validators: dict[tuple[str, str | None], Draft202012Validator] = {}
_compiling = threading.Lock()


def _validator(path: str, definition: str | None) -> Draft202012Validator:
    """The validator of a schema (or of one of its `$defs`), made once per process. Made under
    a lock: a fresh web process gets 20 agents' first reports at once, and each thread made
    the same 25 ms validator while the others waited for the GIL (half a second for all)."""
    found = _validators.get((path, definition))
    if found is None:
        with _compiling:
            found = _validators.get((path, definition))
            if found is None:
                schema = load(path)
                if definition is not None:  # one of its $defs, with the others to refer to
                    schema = {"$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"}
                found = _validators[(path, definition)] = Draft202012Validator(schema)
    return found


def prepare(path: str | Path) -> None:
    """Make the validators of a schema and of each of its `$defs` now (at a process's
    start-up), not in the first requests that need them."""
    for definition in [None, *load(path).get("$defs", {})]:
        _validator(str(path), definition)


def validate(
    path: str | Path, data: Any, *, definition: str | None = None, what: str = "the input"
) -> None:
    """Raise an ApplicationError (400) naming the field when `data` does not match the
    schema (or its `$defs` entry `definition`)."""
    validator = _validator(str(path), definition)
    if validator.is_valid(data):  # the common case, without collecting errors
        return
    errors = list(validator.iter_errors(data))
    if errors:
        error = _most_useful(errors, data)
        field, message = describe(error, what=what)
        raise ApplicationError(message, field=field, code=ErrorCode.INVALID)


def field_name(path: Iterable[Any]) -> str:
    """A JSON path as the API names fields: resources.processes, prepare[0]."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _most_useful(errors: list[ValidationError], data: Any) -> ValidationError:
    """The error a user should read first: the shallowest, and within an anyOf the branch
    the input meant (the one whose required keys it has)."""
    error = min(errors, key=lambda e: (len(e.absolute_path), e.validator != "required"))
    while error.validator in ("anyOf", "oneOf") and error.context:
        chosen = _branch_meant(error)
        if chosen is None:
            break
        error = chosen
    return error


def _branch_meant(error: ValidationError) -> ValidationError | None:
    instance: Any = error.instance  # set on every error a validator yields (stubs: or Unset)
    branches: Any = error.validator_value or []
    for index, branch in enumerate(branches):
        branch = _resolved(error, branch)
        required = branch.get("required") or []
        matches_type = branch.get("type") == _json_type(instance)
        if matches_type and required and isinstance(instance, Mapping):
            if all(key in instance for key in required):
                inner = [e for e in error.context or [] if e.schema_path[0] == index]
                if inner:
                    return min(inner, key=lambda e: len(e.absolute_path))
        elif matches_type and not required and branch.get("type") == "array":
            inner = [e for e in error.context or [] if e.schema_path[0] == index]
            if inner:
                return min(inner, key=lambda e: len(e.absolute_path))
    return None


def _resolved(error: ValidationError, schema: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        root = error.schema if isinstance(error.schema, Mapping) and "$defs" in error.schema else {}
        return (root.get("$defs") or {}).get(ref.rsplit("/", 1)[1], schema)
    return schema


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, Sequence):
        return "array"
    return "null"


def describe(error: ValidationError, *, what: str = "the input") -> tuple[str | None, str]:
    """(field, message) for a schema error, in the words the API uses."""
    field = field_name(error.absolute_path) or None
    name = field or what
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    custom = schema.get("x-error")
    got = reprlib.repr(error.instance)
    # set on every error a validator yields (the stubs allow Unset, for errors made by hand)
    instance: Any = error.instance
    value: Any = error.validator_value
    keyword = error.validator
    if keyword == "required":
        missing = [k for k in value if k not in (instance or {})]
        key = missing[0] if missing else "?"
        full = f"{field}.{key}" if field else key
        return full, custom or f"{full} is required"
    if custom:
        return field, custom
    if keyword == "additionalProperties":
        allowed = sorted((schema.get("properties") or {}).keys())
        extra = sorted(set(instance) - set(allowed))
        where = f"{field}: unknown" if field else f"unknown key(s) in {what}:"
        key = f"{field}.{extra[0]}" if field and extra else (extra[0] if extra else field)
        return key, (
            f"{where} {', '.join(extra)}; allowed: {', '.join(allowed) or 'none'}"
            if field
            else f"{where} {', '.join(extra)}; allowed: {', '.join(allowed)}"
        )
    if keyword == "type":
        kinds: list[str] = value if isinstance(value, list) else [value]
        return field, f"{name} must be {' or '.join(_TYPES.get(k, k) for k in kinds)}, got {got}"
    if keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return field, f"{name} must be {_bounds(schema)}, got {got}"
    if keyword == "enum":
        return field, f"{name} must be one of {', '.join(map(str, value))}; got {got}"
    if keyword in ("minItems", "maxItems"):
        if keyword == "minItems" and value == 1 and not instance:
            return field, f"{name} is empty; give at least one"
        return field, f"{name} must have {_count(schema, 'Items')} items, got {len(instance)}"
    if keyword in ("minLength", "maxLength", "pattern"):
        return field, f"{name} must be text of {_count(schema, 'Length')} characters, got {got}"
    if keyword == "propertyNames":
        return field, (
            f"{name}: {got} is not a name: names are identifiers (letters, digits, _; not "
            "starting with a digit)"
        )
    if keyword in ("anyOf", "oneOf"):
        options = [s["title"] for s in value if isinstance(s, Mapping) and s.get("title")]
        hint = f" ({', '.join(options)})" if options else ""
        return field, f"{name} is none of the forms it may take{hint}; got {got}"
    return field, f"{name}: {error.message}"


def _bounds(schema: Mapping[str, Any]) -> str:
    low, high = _number(schema.get("minimum")), _number(schema.get("maximum"))
    above, below = _number(schema.get("exclusiveMinimum")), _number(schema.get("exclusiveMaximum"))
    kinds = schema.get("type")
    whole = kinds == "integer" or (isinstance(kinds, list) and "integer" in kinds)
    kind = "a whole number" if whole else "a number"
    if low is not None and high is not None:
        return f"{kind} from {low} to {high}"
    if above is not None and high is not None:
        return f"{kind} above {above} and at most {high}"
    if above is not None:
        return f"{kind} above {above}"
    if low is not None:
        return f"{kind} ≥ {low}"
    if high is not None:
        return f"{kind} ≤ {high}"
    if below is not None:
        return f"{kind} below {below}"
    return kind


def _number(value: Any) -> str | None:
    """A bound as a message shows it: whole numbers in full (2147483647, not 2.14748e+09)."""
    if value is None:
        return None
    return str(value) if isinstance(value, int) else f"{value:g}"


def _count(schema: Mapping[str, Any], suffix: str) -> str:
    low, high = schema.get(f"min{suffix}"), schema.get(f"max{suffix}")
    if low is not None and high is not None:
        return f"{low} to {high}" if low != high else f"exactly {low}"
    if low is not None:
        return f"at least {low}"
    return f"at most {high}"


def schema_files() -> list[Path]:
    """Every app's schemas: `<app>/schemas/*.json`, each titled with its component name."""
    return sorted(
        path
        for config in django_apps.get_app_configs()
        for path in (Path(config.path) / "schemas").glob("*.json")
    )


def component_ref(name: str) -> dict[str, str]:
    """An OpenAPI reference to a schema published as a component (its title, or a $defs
    name in it), for extend_schema and extend_schema_field."""
    return {"$ref": f"#/components/schemas/{name}"}


def map_of(node: dict[str, Any]) -> dict[str, Any]:
    """An object whose keys are names and whose values all match `node` (a parameter's
    values by name, objectives by name)."""
    return {"type": "object", "additionalProperties": node}


def inlined(path: str | Path, *pointer: str) -> dict[str, Any]:
    """A node of a schema file (`pointer`: its keys from the root) with the `$defs` it refers
    to written in place, for a schema that is not published as components (a package's
    manifest, packages/package.schema.json)."""
    root = load(path)
    node: Any = root
    for key in pointer:
        node = node[key]
    return _inline(node, root.get("$defs", {}))


def _inline(node: Any, defs: Mapping[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return {**_inline(defs[ref.rsplit("/", 1)[1]], defs), **_inline(rest, defs)}
        return {k: _inline(v, defs) for k, v in node.items() if k != "x-error"}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def add_components(result: dict[str, Any], generator: Any, request: Any, public: Any) -> Any:
    """drf-spectacular postprocessing hook: every app's schema as an OpenAPI 3.1 component
    named by its title, its $defs as sibling components (their refs rewritten)."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    for path in schema_files():
        schema = copy.deepcopy(load(path))
        defs = schema.pop("$defs", {})
        for key in ("$schema", "$id"):
            schema.pop(key, None)
        if "title" in schema:  # a file of $defs only publishes those
            schemas[schema["title"]] = _rebase(schema)
        for name, node in defs.items():
            schemas[name] = _rebase(node)
    result["components"]["schemas"] = dict(sorted(schemas.items()))
    return result


def _rebase(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
                out[key] = "#/components/schemas/" + value.rsplit("/", 1)[1]
            elif key == "x-error":
                continue
            else:
                out[key] = _rebase(value)
        return out
    if isinstance(node, list):
        return [_rebase(v) for v in node]
    return node
