"""The docs' generated tables: field tables from the JSON Schemas that validate the input, and
the benchmark results from the committed results file.

    scripts/render_docs.py           rewrite the tables in docs/ (between their markers)
    scripts/render_docs.py --check   exit 1 when a table is stale (`make lint`)

A field table sits between `<!-- fields: <schema file>[#<definition>] -->` and
`<!-- /fields -->` in a Markdown file; it lists every field with its type, default and
description, nested fields by their dotted path (resources.processes), so the docs say what
the API checks.

A results table sits between `<!-- bench: <results file> -->` and `<!-- /bench -->`: one row
per figure of the results file (bench/results.json, which every full-size benchmark run
updates), with its value, its target as bench/figures.py sets it now (a recorded value is
judged against today's target, not the one it was measured under), whether it meets it,
the command that reproduces it, and the date, commit and machine of the measurement.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT))
from bench.figures import target_of  # noqa: E402  (the catalogue of targets)

MARKER = re.compile(
    r"(<!-- fields: (?P<ref>[^ ]+) -->\n)(?P<body>.*?)(<!-- /fields -->)", re.DOTALL
)
BENCH_MARKER = re.compile(
    r"(<!-- bench: (?P<ref>[^ ]+) -->\n)(?P<body>.*?)(<!-- /bench -->)", re.DOTALL
)


def resolve(root: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return resolve(root, root["$defs"][ref.rsplit("/", 1)[1]])
    return node


def type_of(root: dict[str, Any], node: dict[str, Any]) -> str:
    node = resolve(root, node)
    if "enum" in node and len(node["enum"]) > 6 and node.get("title"):
        return str(node["title"])
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    kinds = node.get("type")
    if isinstance(kinds, list):
        return " or ".join(k for k in kinds if k != "null") + (
            " or null" if "null" in kinds else ""
        )
    if kinds == "array":
        items = node.get("items") or {}
        first = (node.get("prefixItems") or [None])[0]
        if first is not None:
            return f"list [{type_of(root, first)}, …]"
        return f"list of {type_of(root, items)}" if items else "list"
    if kinds == "object" and "additionalProperties" in node and not node.get("properties"):
        value = node["additionalProperties"]
        return f"name → {type_of(root, value)}" if isinstance(value, dict) else "object"
    if kinds:
        return str(kinds)
    for key in ("anyOf", "oneOf"):
        if key in node:
            parts = [resolve(root, b).get("title") or type_of(root, b) for b in node[key]]
            # "`max` \| `min`, or name → `max` \| `min`": a comma where a part is a choice
            return (", or " if any("\\|" in p for p in parts) else " or ").join(parts)
    return "any"


def bounds(node: dict[str, Any]) -> str:
    parts = []
    for key, sign in (
        ("minimum", "≥"),
        ("exclusiveMinimum", ">"),
        ("maximum", "≤"),
        ("exclusiveMaximum", "<"),
    ):
        if key in node:
            parts.append(
                f"{sign} {node[key] if isinstance(node[key], int) else format(node[key], 'g')}"
            )
    if "maxLength" in node:
        parts.append(f"≤ {node['maxLength']} characters")
    return ", ".join(parts)


def rows(
    root: dict[str, Any], node: dict[str, Any], prefix: str, *, variant: bool = False
) -> list[tuple[str, ...]]:
    node = resolve(root, node)
    required = set() if variant else set(node.get("required") or [])
    out: list[tuple[str, ...]] = []
    for name, child in (node.get("properties") or {}).items():
        path = f"{prefix}{name}"
        target = resolve(root, child)
        description = target.get("description") or child.get("description") or ""
        limits = bounds(target)
        default = target.get("default", child.get("default"))
        out.append(
            (
                f"`{path}`" + (" (required)" if name in required else ""),
                type_of(root, child),
                "" if default is None else f"`{json.dumps(default)}`",
                " ".join(x for x in (description, f"({limits})" if limits else "") if x),
            )
        )
        if target.get("type") == "object" and target.get("properties"):
            out += rows(root, target, f"{path}.")
        value = target.get("additionalProperties")
        if isinstance(value, dict) and not target.get("properties"):
            inner = resolve(root, value)
            for branch in inner.get("anyOf") or [inner]:
                branch = resolve(root, branch)
                if branch.get("properties"):
                    out += rows(root, branch, f"{path}.<name>.", variant=True)
    return out


def table(ref: str) -> str:
    file, _, definition = ref.partition("#")
    root = json.loads((ROOT / file).read_text())
    node = root["$defs"][definition] if definition else root
    lines = ["| field | type | default | what it is |", "|---|---|---|---|"]
    for cells in rows(root, node, ""):
        lines.append("| " + " | ".join(c.replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def measured(value: float, unit: str) -> str:
    """A figure's value as the results page prints it: 1.031×, 9.5 %, 1,385 runs/s."""
    number = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    if unit == "x":
        return f"{number}×"
    return f"{number} {unit}" if unit else number


def results_table(ref: str) -> str:
    results = json.loads((ROOT / ref).read_text())
    lines = [
        "| figure | value | target | meets | command | date | commit | machine |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in sorted(results.items()):
        target = target_of(name)
        meets = {True: "yes", False: "**no**", None: "—"}[
            target.met_by(r["value"]) if target else None
        ]
        cells = (
            f"`{name}`",
            f"**{measured(r['value'], r['unit'])}**",
            f"{target}{'×' if r['unit'] == 'x' else ' ' + r['unit']}" if target else "—",
            meets,
            f"`{r['command']}`" if r.get("command") else "—",
            r.get("date") or "—",
            f"`{r['commit']}`" if r.get("commit") else "—",
            r.get("machine") or "—",
        )
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def render(text: str) -> str:
    text = MARKER.sub(lambda m: m.group(1) + table(m.group("ref")) + m.group(4), text)
    return BENCH_MARKER.sub(lambda m: m.group(1) + results_table(m.group("ref")) + m.group(4), text)


def main(argv: list[str]) -> int:
    stale = []
    for doc in sorted(DOCS.rglob("*.md")):
        text = doc.read_text()
        new = render(text)
        if new != text:
            stale.append(doc.relative_to(ROOT))
            if "--check" not in argv:
                doc.write_text(new)
    if "--check" in argv and stale:
        names = ", ".join(map(str, stale))
        print(f"render-docs: stale generated tables in {names}; run scripts/render_docs.py")
        return 1
    print(f"render-docs: {'rewrote ' + ', '.join(map(str, stale)) if stale else 'ok'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
