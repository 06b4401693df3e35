"""`windtunnel sensitivity`, `windtunnel pareto` and `windtunnel mesh-independence`: which
parameters a study's objectives depend on, the best trade-offs between them, and whether its
mesh is fine enough."""

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


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def front_summary(answer: dict[str, Any]) -> str:
    """ "14 runs on the front of 18 feasible (18 completed) · hypervolume 80.2 % of the box" """
    share = answer["hypervolume_share"]
    return (
        f"{answer['front_size']} runs on the front of {answer['feasible']} feasible "
        f"({answer['completed']} completed)"
        + (f" · hypervolume {100 * share:.1f} % of the box" if share is not None else "")
    )


def front_table(answer: dict[str, Any]) -> Table:
    """The front's runs, ordered along the first objective, with each objective's value."""
    names = [o["name"] for o in answer["objectives"]]
    arrows = {o["name"]: "↑" if o["direction"] == "max" else "↓" for o in answer["objectives"]}
    title = "Pareto front: " + ", ".join(f"{n} {arrows[n]}" for n in names)
    table = Table(title=title, title_justify="left")
    table.add_column("run", justify="right")
    for name in names:
        table.add_column(f"{name} {arrows[name]}", justify="right")
    extra = [c["objective"] for c in answer["constraints"] if c["objective"] not in names]
    for name in dict.fromkeys(extra):
        table.add_column(name, justify="right", style="dim")
    front = [r for r in answer["runs"] if r["front"]]
    first = names[0]
    for run in sorted(front, key=lambda r: r["values"][first]):
        cells = [_number(run["values"][n]) for n in (*names, *dict.fromkeys(extra))]
        table.add_row(str(run["index"]), *cells)
    return table


@cli.command()
@click.argument("study_id", metavar="STUDY")
@click.option(
    "--objectives",
    help="Two or three objectives with the way each is better, e.g. LD:max,Cd:min (default: "
    "an adaptive pareto study's own).",
)
@click.option(
    "--constraint",
    "constraints",
    multiple=True,
    help="A range the runs must keep, e.g. Cl>=0.5 or Cd<=0.02 (repeatable).",
)
@json_option
@pass_state
def pareto(
    state: State, study_id: str, objectives: str | None, constraints: tuple[str, ...]
) -> None:
    """The best trade-offs between two or three objectives: the runs on the study's Pareto
    front (no run is at least as good at everything), the front's hypervolume, and after
    each batch of an adaptive study how it grew."""
    answer = state.client().study(study_id).pareto(objectives, constraints=constraints)
    if state.json:
        state.print_json(answer)
        return
    state.out.print(front_summary(answer))
    state.out.print(front_table(answer))
    for c in answer["constraints"]:
        low, high = c["min"], c["max"]
        kept = f"{low:g} ≤ {c['objective']}" if low is not None else c["objective"]
        kept += f" ≤ {high:g}" if high is not None else ""
        state.note(f"constraint: {kept}")
    if answer["history"]:
        steps = ", ".join(
            f"{h['batch']}: {100 * h['hypervolume_share']:.1f} %" for h in answer["history"]
        )
        state.note(f"hypervolume after each batch: {steps}")
    if answer["missing"]:
        state.note(f"{answer['missing']} completed run(s) without a value of an objective")


def gci_table(answer: dict[str, Any]) -> Table:
    """Per objective: the three levels' values, the observed order, the extrapolated value,
    GCI fine, and whether the levels are in the asymptotic range."""
    levels = ", ".join(f"{level['value']:g}" for level in answer["levels"])
    table = Table(
        title=f"Mesh independence over {answer['parameter']} ({levels})", title_justify="left"
    )
    for column in (
        "objective",
        "fine",
        "medium",
        "coarse",
        "order p",
        "extrapolated",
        "GCI fine",
        "asymptotic",
    ):
        table.add_column(column, justify="left" if column == "objective" else "right")
    for name, g in answer["objectives"].items():
        ratio = f"{g['asymptotic_ratio']:.3g}"
        table.add_row(
            name,
            *(_number(v) for v in g["phi"]),
            _number(g["p"]),
            _number(g["phi_ext"]),
            f"{100 * g['gci_fine']:.2g} %",
            ("yes" if g["in_asymptotic_range"] else "no")
            + f" ({ratio})"
            + (" oscillating" if g["oscillatory"] else ""),
        )
    return table


@cli.command("mesh-independence")
@click.argument("study_id", metavar="STUDY")
@click.option("--parameter", required=True, help="The refinement parameter, e.g. cells or mesh.")
@click.option(
    "--kind",
    type=click.Choice(["per_direction", "total", "size"]),
    default="per_direction",
    show_default=True,
    help="What the parameter's value is: cells per direction, total cells, or the cell size.",
)
@click.option(
    "--dims",
    type=click.IntRange(1, 3),
    default=3,
    show_default=True,
    help="The mesh's dimensions (for --kind total: h = N^(-1/dims)).",
)
@click.option(
    "--csv", "as_csv", is_flag=True, help="Print the answer as CSV, one row per objective."
)
@json_option
@pass_state
def mesh_independence(
    state: State, study_id: str, parameter: str, kind: str, dims: int, as_csv: bool
) -> None:
    """Is the mesh fine enough? Per objective, over the refinement parameter's three finest
    levels: the observed order of accuracy, the value extrapolated to a zero cell size and
    the grid convergence index (Celik et al. 2008), with the asymptotic-range check."""
    study = state.client().study(study_id)
    if as_csv:
        click.echo(study.mesh_independence(parameter, kind=kind, dims=dims, csv=True), nl=False)
        return
    answer = study.mesh_independence(parameter, kind=kind, dims=dims)
    if state.json:
        state.print_json(answer)
        return
    state.out.print(gci_table(answer))
    for name, why in answer["refused"].items():
        state.note(f"{name}: {why}")
