"""Request bodies, parsed: JSON nested deeper than any request of the API needs is a 400;
a study spec may come as YAML too (`YAMLParser`, on the endpoints that take a spec).

Python's json module recurses once per level: a body of 100,000 `[` ran it out of stack
(a RecursionError, a 500, before any view saw the request). `JSONParser` is DRF's, with
that and any body nested more than MAX_DEPTH levels refused as a parse error that says so.
It is the API's default JSON parser (REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]).
"""

from __future__ import annotations

import math
from typing import Any

import yaml
from rest_framework import parsers
from rest_framework.exceptions import ParseError

MAX_DEPTH = 64  # a study spec nests about 6 levels deep


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, refusing bodies nested more than MAX_DEPTH levels deep (400)."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(too_deep()) from None
        if nesting_exceeds(data, MAX_DEPTH):
            raise ParseError(too_deep())
        return data


def too_deep() -> str:
    return (
        f"JSON parse error - the body is nested more than {MAX_DEPTH} levels deep; "
        "send a flatter document"
    )


def nesting_exceeds(data: Any, limit: int) -> bool:
    """Whether lists and objects in `data` nest more than `limit` levels deep (level by
    level, without recursion)."""
    level: list[Any] = [data]
    depth = 0
    while level:
        containers = [v for v in level if isinstance(v, list | dict)]
        if not containers:
            return False
        depth += 1
        if depth > limit:
            return True
        level = [
            item
            for c in containers
            for item in (c.values() if isinstance(c, dict) else c)
            if isinstance(item, list | dict)
        ]
    return False


# --- YAML: the study spec as users keep it (docs/study-spec.md) ---------------------------

# a spec is a few kB, 10,000 values of a parameter some 100 kB; PyYAML's own parser (not
# libyaml's: that one recurses in C and a body nested 100,000 levels deep crashes the
# process) takes about 0.5 s of CPU for the largest body
YAML_MAX_BYTES = 256 * 1024
YAML_MAX_NODES = 200_000  # values, counting every use of an anchor (no alias bombs)


class YAMLSpecLoader(yaml.SafeLoader):
    """PyYAML's safe loader, with dates left as text (JSON has no date type)."""


YAMLSpecLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class YAMLParser(parsers.BaseParser):
    """A body in YAML (`Content-Type: application/yaml`), as JSON would have given it.

    Safe loading only (no Python objects), at most YAML_MAX_BYTES, nested at most
    MAX_DEPTH levels, at most YAML_MAX_NODES values (anchors counted at each use), and only
    what JSON can say: text keys, finite numbers, text, booleans, null, lists, mappings.
    Anything else is a parse error (400) that says what and where.
    """

    media_type = "application/yaml"

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        raw = stream.read(YAML_MAX_BYTES + 1) if stream is not None else b""
        if len(raw) > YAML_MAX_BYTES:
            raise ParseError(
                f"YAML parse error - the body is larger than {YAML_MAX_BYTES // 1024} KiB; "
                "a study spec is a few kB (upload a case with POST /api/v1/uploads/)"
            )
        encoding = (parser_context or {}).get("encoding") or "utf-8"
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            raise ParseError(f"YAML parse error - the body is not {encoding} text") from None
        try:
            data = yaml.load(text, Loader=YAMLSpecLoader)  # noqa: S506 — a SafeLoader
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark
            where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
            raise ParseError(f"YAML parse error - {where}{exc.problem or exc}") from None
        except yaml.YAMLError as exc:
            raise ParseError(f"YAML parse error - {exc}") from None
        except RecursionError:
            raise ParseError(too_deep().replace("JSON", "YAML")) from None
        problem = yaml_as_json_problem(data)
        if problem:
            raise ParseError(f"YAML parse error - {problem}")
        return data


class YAMLAliasParser(YAMLParser):
    """The same, for the older `application/x-yaml` and `text/yaml`."""

    media_type = "application/x-yaml"


class YAMLTextParser(YAMLParser):
    media_type = "text/yaml"


YAML_PARSERS = (YAMLParser, YAMLAliasParser, YAMLTextParser)


def yaml_as_json_problem(data: Any) -> str | None:
    """What in a loaded YAML document JSON could not say (or that is too big or deep): a
    message naming where, or None (walked level by level, at most YAML_MAX_NODES values)."""
    level: list[tuple[str, Any]] = [("", data)]
    depth = nodes = 0
    while level:
        depth += 1
        if depth > MAX_DEPTH + 1:
            return f"the body is nested more than {MAX_DEPTH} levels deep; send a flatter document"
        following: list[tuple[str, Any]] = []
        for path, value in level:
            nodes += 1
            if nodes > YAML_MAX_NODES:
                return f"the body holds more than {YAML_MAX_NODES:,} values (anchors count at each use)"
            where = path or "the document"
            if isinstance(value, dict):
                for key, item in value.items():
                    if not isinstance(key, str):
                        return (
                            f"{where}: the key {key!r} is not text; quote it "
                            "(YAML reads yes, no, on, off, numbers and null as other types)"
                        )
                    following.append((f"{path}.{key}" if path else key, item))
            elif isinstance(value, list):
                following.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
            elif isinstance(value, float) and not math.isfinite(value):
                return f"{where}: {value} is not a finite number"
            elif value is not None and not isinstance(value, str | int | float):
                return f"{where}: a {type(value).__name__} value is not JSON; write it as text"
        level = following
    return None
