"""`windtunnel`: the command line (docs/cli.md; the analysis commands in cli_analysis). Every
command takes --json (one JSON document on standard output; errors as JSON on
standard error), and exits with a code a script can trust (errors.ExitCode): 0 done, 1 the
study or run ended with failures, 2 usage, 3 authentication, 4 the portal refused the
request (its message says why), 5 the portal unreachable or failing, 130 interrupted.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from . import config
from .client import Client, __version__, load_spec, settings_from_text
from .errors import ExitCode, UsageError, WindtunnelError
from .models import RUN_TERMINAL_STATES, as_json
from .progress import legend
from .study import Study
from .views import rows_table, runs_table, study_view, styled_state, upload_view


@dataclasses.dataclass
class State:
    """What the commands share: where the portal is, how to print, the exit code."""

    url: str | None = None
    token: str | None = None
    profile: str | None = None
    json: bool = False
    exit_code: ExitCode = ExitCode.OK
    interrupt_noted: bool = False
    # no rich markup: names, parameters and log lines print as they are
    out: Console = dataclasses.field(default_factory=lambda: Console(highlight=False, markup=False))
    err: Console = dataclasses.field(
        default_factory=lambda: Console(stderr=True, highlight=False, markup=False)
    )
    _client: Client | None = None

    def client(self) -> Client:
        if self._client is None:
            url, token = config.resolve(url=self.url, token=self.token, profile=self.profile)
            self._client = Client(url, token)
        return self._client

    def print_json(self, data: Any) -> None:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))

    def note(self, message: str) -> None:
        """A line for the person at the terminal (standard error: stdout stays parseable)."""
        self.err.print(message, soft_wrap=True)


F = TypeVar("F", bound=Callable[..., Any])
pass_state = click.make_pass_decorator(State)


def json_option(f: F) -> F:
    """--json: print JSON for scripts (set at once, so errors print as JSON too)."""

    def remember(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
        if value:
            ctx.ensure_object(State).json = True
        return value

    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        expose_value=False,
        callback=remember,
        help="Print JSON (for scripts).",
    )(f)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", metavar="URL", help="The portal (default: WINDTUNNEL_URL or a profile).")
@click.option("--token", metavar="TOKEN", help="An API token (default: WINDTUNNEL_TOKEN).")
@click.option(
    "--profile", metavar="NAME", help="A profile stored by login (default: WINDTUNNEL_PROFILE)."
)
@click.version_option(__version__, prog_name="windtunnel")
@pass_state
def cli(state: State, url: str | None, token: str | None, profile: str | None) -> None:
    """Parametric OpenFOAM studies on a Windtunnel portal.

    Set WINDTUNNEL_URL and WINDTUNNEL_TOKEN, or run `windtunnel login URL` once.
    Exit codes: 0 done, 1 the study ended with failures, 2 usage, 3 authentication,
    4 refused by the portal, 5 portal unreachable, 130 interrupted.
    """
    state.url, state.token, state.profile = url, token, profile


# --- signing in ----------------------------------------------------------------------------


@cli.command()
@click.argument("url")
@click.option(
    "--name", default="default", show_default=True, help="Store the token as this profile."
)
@click.option("--username", "-u", help="Your user name (asked when not given).")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@json_option
@pass_state
def login(state: State, url: str, name: str, username: str | None, password_stdin: bool) -> None:
    """Sign in to the portal at URL and store an API token for it."""
    base = config.normalize_url(url)
    if not username:
        username = click.prompt("Username", err=True)
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt("Password", hide_input=True, err=True)
    # the token's name on the portal: logging in again from here replaces that token
    host = socket.gethostname()
    label = f"windtunnel-cli@{host}" + (f" {name}" if name != "default" else "")
    client, token = Client.login(base, username=username, password=password, name=label[:100])
    client.close()
    path = config.store(
        config.Profile(
            name=name, url=base, token=token.token, tenant=token.tenant, username=username
        )
    )
    if state.json:
        state.print_json(
            {
                "profile": name,
                "url": base,
                "username": username,
                "tenant": token.tenant,
                "config": str(path),
            }
        )
        return
    state.out.print(
        f"signed in to {base} as {username} (tenant {token.tenant}); "
        f"the token is stored as profile {name!r} in {path}"
    )


@cli.command()
@click.argument("name", default="default")
@json_option
@pass_state
def logout(state: State, name: str) -> None:
    """Forget the token stored as profile NAME (it stays valid on the portal)."""
    removed = config.forget(name)
    if state.json:
        state.print_json({"profile": name, "removed": removed})
    elif removed:
        state.out.print(f"forgot profile {name!r} ({config.config_path()})")
    else:
        raise UsageError(f"no profile named {name!r} in {config.config_path()}")


# --- API tokens ----------------------------------------------------------------------------


def _when(value: str | None, never: str = "") -> str:
    """An API moment as a table shows it: `2026-05-01 12:00` (UTC)."""
    return value[:16].replace("T", " ") if value else never


@cli.group(invoke_without_command=True)
@json_option
@click.pass_context
def tokens(ctx: click.Context) -> None:
    """Your API tokens on the portal: list them (this), `tokens create NAME`, or
    `tokens revoke NAME|ID`. The dashboard has them too (/settings/tokens)."""
    if ctx.invoked_subcommand is not None:
        return
    state = ctx.ensure_object(State)
    found = state.client().tokens()
    if state.json:
        state.print_json([as_json(t) for t in found])
        return
    if not found:
        state.out.print("no API tokens; make one with `windtunnel tokens create NAME`")
        return
    table = Table("id", "name", "prefix", "created (UTC)", "last used", "expires", box=None)
    for t in found:
        expires = _when(t.expires_at, "never") + (" (expired)" if t.expired else "")
        table.add_row(
            str(t.id),
            t.name,
            t.prefix + "…",
            _when(t.created_at),
            _when(t.last_used_at, "never"),
            expires,
        )
    state.out.print(table)


@tokens.command("create")
@click.argument("name")
@click.option(
    "--expires-in-days", type=int, metavar="DAYS", help="It expires after DAYS (1 to 365)."
)
@json_option
@pass_state
def tokens_create(state: State, name: str, expires_in_days: int | None) -> None:
    """Make an API token named NAME; its key is printed this once (the first line)."""
    made = state.client().token_create(name, expires_in_days=expires_in_days)
    if state.json:
        state.print_json(as_json(made))
        return
    click.echo(made.key)
    state.note(
        f"token {made.name!r} (id {made.id}), expires {_when(made.expires_at, 'never')}: "
        "copy the key now, it is not shown again"
    )


@tokens.command("revoke")
@click.argument("token", metavar="NAME|ID")
@json_option
@pass_state
def tokens_revoke(state: State, token: str) -> None:
    """Revoke one of your API tokens (by name, or id): it opens nothing from now on."""
    revoked = state.client().token_revoke(token)
    if state.json:
        state.print_json(as_json(revoked))
        return
    state.out.print(f"revoked token {revoked.name!r} (id {revoked.id}, {revoked.prefix}…)")


# --- templates and cases -------------------------------------------------------------------


@cli.command()
@click.argument("name", required=False)
@json_option
@pass_state
def templates(state: State, name: str | None) -> None:
    """List the case templates, or show one template's parameters."""
    client = state.client()
    if name:
        template = client.template(name)
        if state.json:
            state.print_json(as_json(template))
            return
        state.out.print(
            Text.assemble(
                (template.name, "bold"), f"  {template.title}  (solver {template.solver})"
            )
        )
        table = Table("parameter", "default", "unit", "range", "description", box=None)
        for pname, p in template.parameters.items():
            bounds = f"{p.get('min', '')} … {p.get('max', '')}" if "min" in p or "max" in p else ""
            table.add_row(
                pname,
                str(p.get("default", "")),
                p.get("unit") or "",
                bounds,
                p.get("description", ""),
            )
        state.out.print(table)
        if template.objectives:
            state.out.print("objectives: " + ", ".join(template.objectives))
        return
    found = client.templates()
    if state.json:
        state.print_json([as_json(t) for t in found])
        return
    table = Table("name", "solver", "parameters", "title", box=None)
    for t in found:
        table.add_row(t.name, t.solver, ", ".join(t.parameters), t.title)
    state.out.print(table)


@cli.command()
@click.argument("case", type=click.Path(exists=True, path_type=Path))
@json_option
@pass_state
def upload(state: State, case: Path) -> None:
    """Upload a case: a folder (packed as .tar.gz for you) or a .tar.gz/.tgz/.zip archive.

    The first line printed is the upload's id: a spec's `case`, or `submit --case ID`.
    """
    done = state.client().upload(case)
    if state.json:
        state.print_json(as_json(done))
        return
    state.out.print(upload_view(done))


# --- studies -------------------------------------------------------------------------------


def _spec_and_case(state: State, spec: str, case: str | None) -> tuple[dict[str, Any], str | None]:
    body = load_spec(spec)
    if case and Path(case).exists():
        done = state.client().upload(case)
        if not state.json:
            state.note(f"uploaded {case} as {done.id}")
        return body, done.id
    return body, case


@cli.command()
@click.argument("spec", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--case", metavar="CASE", help="Run on your case: a folder, an archive or an upload id."
)
@json_option
@pass_state
def preview(state: State, spec: str, case: str | None) -> None:
    """What SPEC would make (run count, first rows, quota impact, estimated cost), creating
    nothing."""
    body, case_id = _spec_and_case(state, spec, case)
    answer = state.client().preview(body, case=case_id)
    if state.json:
        state.print_json(as_json(answer))
        return
    state.out.print(f"{answer.run_count} runs of {answer.solver} on {answer.backend}")
    summary = answer.quota.get("summary")
    if summary:
        state.out.print(str(summary))
    cost = answer.estimate.get("summary")
    if cost:
        state.out.print(f"estimated cost: {cost}")
    state.out.print(rows_table(answer.parameters, [], answer.rows))


@cli.command()
@click.argument("spec", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--case", metavar="CASE", help="Run on your case: a folder, an archive or an upload id."
)
@click.option("--watch", is_flag=True, help="Follow it to the end with a live progress bar.")
@click.option("--draft", is_flag=True, help="Save it without submitting.")
@click.option("--no-live", is_flag=True, help="Poll instead of using the websocket.")
@json_option
@pass_state
def submit(
    state: State, spec: str, case: str | None, watch: bool, draft: bool, no_live: bool
) -> None:
    """Submit the study spec SPEC (YAML or JSON, `-` for standard input).

    The first line printed is the study's id and its URL. With --watch, exits 1 when the
    study ends with failed or cancelled runs.
    """
    body, case_id = _spec_and_case(state, spec, case)
    study = state.client().submit(body, case=case_id, draft=draft)
    if not state.json:
        state.out.print(f"{study.id} {study.url}", soft_wrap=True)
        state.out.print(f"{study.name}: {study.record.run_count} runs, {study.state}")
    if watch and not draft:
        _follow(state, study, live=not no_live)
    elif state.json:
        state.print_json(_study_json(study))


@cli.command()
@click.argument("study_id", metavar="STUDY")
@click.option("--no-live", is_flag=True, help="Poll instead of using the websocket.")
@json_option
@pass_state
def watch(state: State, study_id: str, no_live: bool) -> None:
    """Follow a study to its end with a live progress bar (exit 1 if it ends with failures)."""
    _follow(state, state.client().study(study_id), live=not no_live)


def _follow(state: State, study: Study, *, live: bool) -> None:
    try:
        study.wait(progress=not state.json, live=live, console=state.out)
    except KeyboardInterrupt:
        state.note(
            f"stopped watching; the study goes on: windtunnel watch {study.id} "
            f"(or windtunnel cancel {study.id})"
        )
        state.interrupt_noted = True
        raise
    if state.json:
        state.print_json(_study_json(study))
    else:
        state.out.print(Text.assemble(styled_state(study.state), ": ", legend(study.by_state)))
    _exit_for(state, study)


def _exit_for(state: State, study: Study) -> None:
    if study.finished and not study.ok:
        state.exit_code = ExitCode.FAILED


def _study_json(study: Study) -> dict[str, Any]:
    return {**as_json(study.record), "url": study.url}


@cli.command()
@click.argument("study_id", metavar="STUDY")
@click.option("--runs", "max_runs", default=20, show_default=True, help="Show this many runs.")
@json_option
@pass_state
def status(state: State, study_id: str, max_runs: int) -> None:
    """A study's state, progress and runs (exit 1 if it ended with failures)."""
    study = state.client().study(study_id)
    _exit_for(state, study)
    if state.json:
        state.print_json(_study_json(study))
        return
    state.out.print(study_view(study), soft_wrap=True)
    if max_runs > 0:
        runs = state.client().study_runs(study.id)
        table = runs_table(runs[:max_runs])
        state.out.print(table)
        if len(runs) > max_runs:
            state.out.print(f"… and {len(runs) - max_runs} more (--runs N)")


@cli.command()
@click.argument("study_id", metavar="STUDY")
@click.option("--csv", "fmt", flag_value="csv", help="CSV, as the portal writes it.")
@click.option("--json", "fmt", flag_value="json", help="JSON, as the API answers it.")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file."
)
@pass_state
def results(state: State, study_id: str, fmt: str | None, output: Path | None) -> None:
    """A study's results: one row per run, its parameters, state, trust and objectives.

    A table by default; --csv or --json for scripts (-o FILE: written there, its format
    taken from the name's .csv or .json when neither is given).
    """
    state.json = fmt == "json"
    if output is not None and fmt is None:
        fmt = "json" if output.suffix.lower() == ".json" else "csv"
    study = state.client().study(study_id)
    if fmt == "csv":
        text = study.results_csv()
    elif fmt == "json":
        text = json.dumps(as_json(study.results_table()), indent=2, ensure_ascii=False) + "\n"
    else:
        table = study.results_table()
        rows = [dataclasses.asdict(r) for r in table.rows]
        state.out.print(rows_table(table.parameters, table.objectives, rows))
        return
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        state.note(f"wrote {output}")


@cli.command()
@click.argument("study_id", metavar="STUDY")
@json_option
@pass_state
def cancel(state: State, study_id: str) -> None:
    """Cancel every run of a study not yet ended (they keep their results so far)."""
    study = state.client().study(study_id).cancel()
    if state.json:
        state.print_json(_study_json(study))
        return
    state.out.print(
        Text.assemble(
            f"{study.name} ({study.id}) ", styled_state(study.state), ": ", legend(study.by_state)
        )
    )


# --- runs ----------------------------------------------------------------------------------


@cli.command("continue")
@click.argument("run_ids", metavar="RUN...", nargs=-1, required=True)
@click.option("--iterations", "-n", type=int, help="Time steps to add from the write.")
@click.option(
    "--time",
    default="latest",
    show_default=True,
    help="The write to go on from (a run's page lists them): restart from an earlier one.",
)
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="FILE:KEY=VALUE",
    help="A changed setting for a restart (controlDict, fvSolution, fvSchemes), e.g. "
    "fvSolution:relaxationFactors.equations.U=0.5; may be repeated.",
)
@json_option
@pass_state
def continue_(
    state: State,
    run_ids: tuple[str, ...],
    iterations: int | None,
    time: str,
    settings: tuple[str, ...],
) -> None:
    """Continue ended runs from their latest write for --iterations more time steps, or
    restart them from an earlier --time with changed --set settings. Each goes back to the
    queue as a new attempt; its series go on from the old ones."""
    try:
        changed = settings_from_text(settings)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--set") from None
    done = state.client().resume_runs(
        list(run_ids), iterations=iterations, time=time, settings=changed
    )
    if state.json:
        state.print_json(done)
        return
    for run_id in done["continued"]:
        state.out.print(f"run {run_id} queued to go on (windtunnel logs --follow {run_id})")
    for skipped in done["skipped"]:
        state.out.print(f"run {skipped['run']} (#{skipped['index']}) skipped: {skipped['reason']}")


@cli.command()
@click.argument("run_id", metavar="RUN")
@click.option(
    "--follow", "-f", is_flag=True, help="Print new lines as they come, until the run ends."
)
@click.option("--lines", "-n", default=50, show_default=True, help="How many of the last lines.")
@json_option
@pass_state
def logs(state: State, run_id: str, follow: bool, lines: int) -> None:
    """A run's log: its last lines (--follow: then new ones until it ends, exit 1 if it
    did not complete). With --json: the API's answer, or with --follow one JSON object per
    line."""
    run = state.client().run(run_id)
    if not follow:
        if state.json:
            state.print_json(as_json(state.client().log_tail(run.id, lines=lines)))
        else:
            for line in run.log(lines=lines):
                click.echo(line)
        return
    for line in run.follow_log(lines=lines):
        if state.json:
            click.echo(json.dumps({"run": run.id, "line": line}, ensure_ascii=False))
        else:
            click.echo(line)
    if run.state in RUN_TERMINAL_STATES and run.state != "completed":
        state.exit_code = ExitCode.FAILED
        if not state.json:
            state.note(f"run {run.id} {run.state}: {run.record.message or run.record.end_reason}")


@cli.command()
@click.argument("run_id", metavar="RUN")
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), help="A file, or a folder to put it in."
)
@json_option
@pass_state
def download(state: State, run_id: str, output: Path | None) -> None:
    """Download a run's result archive (.tar.gz: final time, postProcessing/, logs)."""
    path = state.client().run(run_id).download(output)
    size = path.stat().st_size
    if state.json:
        state.print_json({"run": run_id, "path": str(path), "bytes": size})
    else:
        state.out.print(f"wrote {path} ({size:,} bytes)")


# --- the entry point -----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> NoReturn:
    """`windtunnel`: run the command line and exit with its code (see ExitCode)."""
    state = State()
    code: int = ExitCode.OK
    try:
        returned = cli.main(args=argv, prog_name="windtunnel", obj=state, standalone_mode=False)
        code = returned if isinstance(returned, int) else state.exit_code
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.ClickException as exc:
        exc.show()
        code = ExitCode.USAGE
    except (click.Abort, KeyboardInterrupt):
        if not state.interrupt_noted:
            state.note("interrupted")
        code = ExitCode.INTERRUPTED
    except WindtunnelError as exc:
        _report(state, exc)
        code = exc.exit_code
    sys.exit(int(code))


def _report(state: State, exc: WindtunnelError) -> None:
    if state.json:
        click.echo(json.dumps({"error": exc.as_dict()}, ensure_ascii=False), err=True)
    else:
        click.echo(f"windtunnel: error: {exc.message}", err=True)


from . import cli_analysis  # noqa: E402, F401  (registers its commands on `cli`)
