"""What the command line prints for people (rich renderables); --json prints the API's own
answers instead."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .models import RunRecord, Upload
from .progress import STYLES, legend, state_bar
from .study import Study


def number(value: Any) -> str:
    """A value for a table cell: floats to 4 significant digits."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def styled_state(value: str) -> Text:
    return Text(value, style=STYLES.get(value.replace("completed_with_failures", "failed"), "bold"))


def upload_view(done: Upload) -> RenderableType:
    """`<id> <file> (N files, N bytes)`, then the placeholders found in each file."""
    lines = [
        Text(f"{done.id} {done.filename} ({done.files_count} files, {done.size_bytes:,} bytes)")
    ]
    for path, names in sorted((done.placeholders or {}).items()):
        lines.append(Text(f"  {path}: " + ", ".join(sorted(names))))
    if not done.placeholders:
        lines.append(Text("  no {{ placeholders }} found: every run would be the same case"))
    return Group(*lines)


def rows_table(parameters: list[str], objectives: list[str], rows: list[dict[str, Any]]) -> Table:
    """Results (or a preview's rows): a column per parameter and objective."""
    extra = ["state", "trust"] if rows and "state" in rows[0] else []
    table = Table("#", *parameters, *objectives, *extra, box=None)
    for i, row in enumerate(rows):
        cells = [str(row.get("index", i))]
        cells += [number(row["parameters"].get(p, "")) for p in parameters]
        cells += [number((row.get("objectives") or {}).get(o, "")) for o in objectives]
        cells += [str(row.get(k, "")) for k in extra]
        table.add_row(*cells)
    return table


def study_view(study: Study) -> RenderableType:
    """A study's name, state, URL, what it runs, and its runs by state."""
    r = study.record
    what = f"template {r.template}" if r.template else f"case {r.case}"
    return Group(
        Text.assemble((r.name, "bold"), f" ({r.id})  ", styled_state(r.state)),
        Text(study.url),
        Text(f"{what} · solver {r.solver} · backend {r.backend} · {r.run_count} runs"),
        Text.assemble(state_bar(study.by_state, r.run_count), "  ", legend(study.by_state)),
    )


def runs_table(runs: list[RunRecord]) -> Table:
    """Runs with their ids (to copy into `logs`, `download`), state and trust, parameters,
    and objectives (or why a run failed or waits)."""
    table = Table("#", box=None)
    table.add_column("run", no_wrap=True, min_width=36)
    for title in ("state", "parameters", "objectives / message"):
        table.add_column(title)
    for run in runs:
        objectives = ", ".join(f"{k}={number(v)}" for k, v in (run.objectives or {}).items())
        note = (
            objectives
            if run.state == "completed"
            else (run.message or run.wait_detail or objectives)
        )
        table.add_row(
            str(run.index),
            run.id,
            Text.assemble(
                (run.state, STYLES.get(run.state, "")), f" ({run.trust})" if run.trust else ""
            ),
            ", ".join(f"{k}={number(v)}" for k, v in run.parameters.items()),
            note,
        )
    return table
