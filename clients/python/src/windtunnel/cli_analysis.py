"""`windtunnel sensitivity`: which parameters a study's objectives depend on."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table
from rich.text import Text

from .cli import State, cli, json_option, pass_state

BAR = 24  # characters of a full (1.0) bar


def _bar(first: float, total: float) -> Text:
    """The first-order share solid, the interactions' part (total - first) shaded."""
    solid = round(first * BAR)
    shaded = max(0, round(total * BAR) - solid)
    return Text("█" * solid, style="cyan") + Text("░" * shaded, style="cyan")


def sensitivity_tables(answer: dict[str, Any]) -> list[Table]:
    """One table per objective: each parameter's S and ST with their intervals, and a bar."""
    tables = []
    for objective in answer["objectives"]:
        table = Table(title=f"{objective['name']} ({objective['runs']} runs)", title_justify="left")
        for column in ("parameter", "S (first order)", "ST (total)", ""):
            table.add_column(column, justify="right" if column.startswith("S") else "left")
        for index in sorted(objective["indices"], key=lambda i: -i["total"]):
            low, high = index["first_interval"]
            tlow, thigh = index["total_interval"]
            table.add_row(
                index["parameter"],
                f"{index['first']:.3f} [{low:.2f}, {high:.2f}]",
                f"{index['total']:.3f} [{tlow:.2f}, {thigh:.2f}]",
                _bar(index["first"], index["total"]),
            )
        tables.append(table)
    return tables


@cli.command()
@click.argument("study_id", metavar="STUDY")
@click.option("--objective", help="One objective (default: all of the study's).")
@click.option(
    "--samples",
    type=int,
    help="The estimator's base samples, a power of two from 256 to 65536 (default 4096).",
)
@json_option
@pass_state
def sensitivity(state: State, study_id: str, objective: str | None, samples: int | None) -> None:
    """Which parameters each objective depends on: first-order (S) and total (ST) Sobol
    indices with their confidence intervals, on the surrogate of the study's completed runs.

    S is the share of an objective's variance a parameter explains alone; ST adds its
    interactions (the bar's shaded part). A parameter whose ST is about 0 can be fixed.
    """
    answer = state.client().study(study_id).sensitivity(objective, samples=samples)
    if state.json:
        state.print_json(answer)
        return
    for table in sensitivity_tables(answer):
        state.out.print(table)
    for skipped in answer["skipped"]:
        state.note(f"{skipped['name']}: not yet ({skipped['reason']})")
    if not answer["objectives"] and not answer["skipped"]:
        state.note("the study has no objective with values")
