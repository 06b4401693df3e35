"""`Study` and `Run`: a study's state, progress, runs and results; a run's series, log and
result archive."""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from rich.console import Console
from rich.live import Live

from .errors import ApiError
from .live import StudyEvent, StudyStream
from .models import (
    RUN_TERMINAL_STATES,
    STUDY_TERMINAL_STATES,
    ResultRow,
    Results,
    RunRecord,
    StudyRecord,
    build,
)
from .progress import StudyMonitor

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from .client import Client

    FloatArray = list[float] | npt.NDArray[np.float64]

#: what Run.series() reads when no max_points is given: every point (the API's most)
ALL_POINTS = 1_000_000


class Series(NamedTuple):
    """A run's series: x (iteration or time) and y, as numpy arrays where numpy is installed,
    else lists; a missing value (the solver printed NaN) is NaN. `x, y = run.series(…)`."""

    x: FloatArray
    y: FloatArray


class Study:
    """A study on the portal. `record` is its last loaded state (`refresh()` loads it again)."""

    def __init__(self, client: Client, record: StudyRecord) -> None:
        self.client = client
        self.record = record

    def __repr__(self) -> str:
        return f"<Study {self.id} {self.name!r} {self.state}>"

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def state(self) -> str:
        return self.record.state

    @property
    def by_state(self) -> dict[str, int]:
        """Its runs counted by state."""
        return dict(self.record.progress.by_state)

    @property
    def url(self) -> str:
        """The study's page in the dashboard."""
        return f"{self.client.url}/studies/{self.id}"

    @property
    def finished(self) -> bool:
        """Nothing will change any more: completed, completed with failures, or cancelled."""
        return self.state in STUDY_TERMINAL_STATES

    @property
    def ok(self) -> bool:
        """Finished, and every run completed."""
        return self.state == "completed"

    def refresh(self) -> Study:
        self.record = build(StudyRecord, self.client.get_json("/api/v1/studies/{id}/", id=self.id))
        return self

    def runs(self, *, state: str | None = None) -> list[Run]:
        """Its runs in index order (only those in `state` if given)."""
        return [Run(self.client, r) for r in self.client.study_runs(self.id, state=state)]

    def cancel(self) -> Study:
        """Cancel every run not yet ended (they keep their results so far)."""
        answer = self.client.call("post", "/api/v1/studies/{id}/cancel/", id=self.id).json()
        self.record = build(StudyRecord, answer)
        return self

    def resume_runs(
        self,
        runs: list[str],
        *,
        iterations: int | None = None,
        time: str = "latest",
        settings: dict[str, dict[str, str]] | None = None,
    ) -> dict[str, Any]:
        """Continue (or restart) ended runs of the study from their writes, as Run.resume
        does each: {"continued": [run ids], "skipped": [{"run", "index", "reason"}]}."""
        body = _resume_body(iterations=iterations, time=time, settings=settings)
        return dict(
            self.client.call(
                "post",
                "/api/v1/studies/{id}/runs/continue/",
                id=self.id,
                json={**body, "runs": runs},
            ).json()
        )

    def results_table(self) -> Results:
        """Its results: parameter and objective names, and one row per run."""
        return self.client.study_results(self.id)

    def results(self) -> list[ResultRow]:
        """One row per run: `row.parameters`, `row.objectives`, `row.state`, `row.trust`, …"""
        return self.results_table().rows

    def sensitivity(self, objective: str | None = None, *, samples: int | None = None) -> Any:
        """Which parameters each objective depends on (the API's answer, docs/api.md,
        "Sensitivity"): per objective, each parameter's first-order and total Sobol index
        with its confidence interval, on the surrogate of the completed runs."""
        params: dict[str, Any] = {}
        if objective is not None:
            params["objective"] = objective
        if samples is not None:
            params["samples"] = samples
        return self.client.get_json("/api/v1/studies/{id}/sensitivity/", id=self.id, params=params)

    def pareto(
        self, objectives: str | None = None, *, constraints: list[str] | tuple[str, ...] = ()
    ) -> Any:
        """The trade-off between two or three objectives (the API's answer, docs/api.md,
        "Pareto front"): each completed run's values, which are on the front, and the front's
        hypervolume. `objectives` as "LD:max,Cd:min" (an adaptive pareto study's own by
        default), `constraints` as ["Cl>=0.5"]."""
        params: dict[str, Any] = {}
        if objectives is not None:
            params["objectives"] = objectives
        if constraints:
            params["constraint"] = list(constraints)
        return self.client.get_json("/api/v1/studies/{id}/pareto/", id=self.id, params=params)

    def mesh_independence(
        self, parameter: str, *, kind: str = "per_direction", dims: int = 3, csv: bool = False
    ) -> Any:
        """Is the mesh fine enough (the API's answer, docs/api.md, "Mesh independence"): per
        objective, over the three finest levels of the refinement `parameter`, the observed
        order, the extrapolated value and the grid convergence index (Celik et al. 2008).
        `kind`: the parameter's value is cells "per_direction", "total" cells (of a `dims`-D
        mesh) or the cell "size". `csv`: the same answer as CSV text."""
        params = {"parameter": parameter, "kind": kind, "dims": dims}
        if csv:
            path = "/api/v1/studies/{id}/mesh-independence.csv"
            return self.client.call("get", path, id=self.id, params=params).text
        path = "/api/v1/studies/{id}/mesh-independence/"
        return self.client.get_json(path, id=self.id, params=params)

    def results_csv(self) -> str:
        """Its results as CSV, as the portal writes it (one column per parameter and
        objective)."""
        return self.client.call("get", "/api/v1/studies/{id}/results.csv", id=self.id).text

    def to_pandas(self) -> pd.DataFrame:
        """Its results as a pandas DataFrame: one row per run, one column per parameter and
        objective, then state, trust, iterations, wall_seconds, end_reason, run (the run's
        id). Needs pandas (pip install 'windtunnel-client[pandas]')."""
        try:
            import pandas as pd  # optional dependency
        except ImportError:
            raise ImportError(
                "Study.to_pandas() needs pandas: pip install 'windtunnel-client[pandas]'"
            ) from None
        table = self.results_table()
        rows = []
        for row in table.rows:
            flat: dict[str, Any] = {"index": row.index}
            flat.update({p: row.parameters.get(p) for p in table.parameters})
            flat.update({o: row.objectives.get(o) for o in table.objectives})
            flat.update(
                state=row.state,
                trust=row.trust,
                iterations=row.iterations,
                wall_seconds=row.wall_seconds,
                end_reason=row.end_reason,
                run=row.run,
            )
            rows.append(flat)
        columns = [
            "index",
            *table.parameters,
            *table.objectives,
            "state",
            "trust",
            "iterations",
            "wall_seconds",
            "end_reason",
            "run",
        ]
        return pd.DataFrame(rows, columns=list(dict.fromkeys(columns))).set_index("index")

    def watch(self, *, live: bool = True, poll: float = 2.0) -> Iterator[StudyEvent]:
        """Its changes as they happen, until it ends: first a snapshot, then `runs` events
        (runs changed state) and `study` events, from the portal's websocket (or, with
        `live=False`, without websockets installed or when the socket fails, by polling
        every `poll` seconds). Gaps in the stream are repaired by loading a snapshot."""
        with StudyStream(self.client, self.id, live=live) as stream:
            while True:
                event = stream.next(poll)
                if event is None:
                    continue
                if event.study is not None:
                    self.record = event.study
                yield event
                if event.finished:
                    if event.study is None:
                        self.refresh()
                    return

    def wait(
        self,
        *,
        progress: bool = False,
        live: bool = True,
        poll: float = 2.0,
        timeout: float | None = None,
        console: Console | None = None,
    ) -> Study:
        """Wait until it ends; with `progress`, show a live progress bar of its runs by state
        and the residuals of its slowest run (on `console`, standard error by default).
        Raises TimeoutError after `timeout` seconds (the study goes on). Answers the study,
        refreshed: see `state`, `ok`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        step = min(poll, 1.0) if progress else poll
        monitor = StudyMonitor(self.client, self.record) if progress else None
        view = (
            Live(monitor, console=console or Console(stderr=True), refresh_per_second=4)
            if monitor is not None
            else None
        )
        with StudyStream(self.client, self.id, live=live) as stream:
            if view is not None:
                view.start()
            try:
                while True:
                    if deadline is not None and time.monotonic() > deadline:
                        raise TimeoutError(
                            f"study {self.id} still {stream.state or self.state} after "
                            f"{timeout:g} s; it goes on"
                        )
                    event = stream.next(step)
                    if event is not None and event.study is not None:
                        self.record = event.study
                    if monitor is not None:
                        if event is not None:
                            monitor.apply(
                                state=event.state, by_state=event.by_state, record=event.study
                            )
                        monitor.refresh(force=event is not None and event.finished)
                    if event is not None and event.finished:
                        break
            finally:
                if view is not None:
                    view.stop()
                    if not view.console.is_terminal:
                        view.console.line()  # the last frame, printed once, ends its line
        if self.state not in STUDY_TERMINAL_STATES:
            self.refresh()
        return self


class Run:
    """A run of a study. `record` is its last loaded state (`refresh()` loads it again)."""

    def __init__(self, client: Client, record: RunRecord) -> None:
        self.client = client
        self.record = record

    def __repr__(self) -> str:
        return f"<Run {self.id} #{self.index} {self.state}>"

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def index(self) -> int:
        return self.record.index

    @property
    def state(self) -> str:
        return self.record.state

    @property
    def parameters(self) -> dict[str, Any]:
        return dict(self.record.parameters)

    @property
    def objectives(self) -> dict[str, Any]:
        return dict(self.record.objectives or {})

    @property
    def finished(self) -> bool:
        return self.state in RUN_TERMINAL_STATES

    @property
    def url(self) -> str:
        """The run's page in the dashboard."""
        return f"{self.client.url}/runs/{self.id}"

    def refresh(self) -> Run:
        self.record = build(RunRecord, self.client.get_json("/api/v1/runs/{id}/", id=self.id))
        return self

    def cancel(self) -> Run:
        """Stop the run (it keeps its results so far)."""
        answer = self.client.call("post", "/api/v1/runs/{id}/cancel/", id=self.id).json()
        self.record = build(RunRecord, answer)
        return self

    def resume(
        self,
        *,
        iterations: int | None = None,
        time: str = "latest",
        settings: dict[str, dict[str, str]] | None = None,
    ) -> Run:
        """Go on from one of the run's writes as a new attempt: `iterations` more time steps
        from its latest write (continue), or from an earlier `time` with changed `settings`
        ({"fvSolution": {"relaxationFactors.equations.U": "0.5"}}: restart). Its series go
        on from the old ones. Raises ApiError naming the field when it cannot."""
        body = _resume_body(iterations=iterations, time=time, settings=settings)
        answer = self.client.call("post", "/api/v1/runs/{id}/continue/", id=self.id, json=body)
        self.record = build(RunRecord, answer.json())
        return self

    def series_names(self) -> list[str]:
        """Every series the run recorded: residual.p, forceCoeffs.Cl, cpu.percent, …"""
        return self.client.telemetry(self.id, max_points=4).available

    def series(
        self, name: str, *, max_points: int | None = None, attempt: int | None = None
    ) -> Series:
        """One series as (x, y) arrays: every point, or downsampled by the portal to
        `max_points` (keeping each bucket's extremes). Raises ApiError (404) naming the
        series it has when it has no series `name`."""
        params: dict[str, Any] = {}
        if attempt is not None:
            params["attempt"] = attempt
        answer = self.client.telemetry(
            self.id, series=[name], max_points=max_points or ALL_POINTS, **params
        )
        if name not in answer.series:
            raise ApiError(
                f"run {self.id} has no series named {name!r}; it has: "
                + (", ".join(answer.available) or "none yet"),
                status=404,
                code="not_found",
                field="series",
            )
        data = answer.series[name]
        x = [float(v) for v in data["x"]]
        y = [math.nan if v is None else float(v) for v in data["y"]]
        return _arrays(x, y)

    def log(self, *, lines: int = 200) -> list[str]:
        """The last lines of its log."""
        return self.client.log_tail(self.id, lines=lines).lines

    def follow_log(self, *, lines: int = 50, poll: float = 1.0) -> Iterator[str]:
        """Its log: the last `lines`, then new lines as they come, until the run ends."""
        self.refresh()
        since = self.record.last_seq  # read before the tail: no line falls in between
        tail = self.log(lines=lines)
        yield from tail
        recent = tail
        # the gap-repair read answers the points of one series too: ask for a short one
        cheap = ""
        while True:
            ended = self.finished
            if not cheap:
                cheap = next(iter(self.series_names()), "")
            fresh, since = _log_since(self.client, self.id, since, cheap)
            skip = _overlap(recent, fresh)
            yield from fresh[skip:]
            recent = (recent + fresh[skip:])[-lines:]
            if ended:
                return
            time.sleep(poll)
            self.refresh()

    def download(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Save its result archive (.tar.gz: final time, postProcessing/, logs, system/):
        to `path` (a file, or a folder to put it in: an existing one, or a name ending in
        /), by default in the current folder under the portal's name for it. Answers where
        it went."""
        with self.client.stream("/api/v1/runs/{id}/archive/", id=self.id) as response:
            name = _filename(response.headers.get("content-disposition", "")) or (
                f"run-{self.id}.tar.gz"
            )
            target = Path(path) if path is not None else Path(name)
            if target.is_dir() or str(path).endswith(("/", os.sep)):
                target.mkdir(parents=True, exist_ok=True)
                target = target / name
            partial = target.with_name(target.name + ".part")
            try:
                with partial.open("wb") as f:
                    for chunk in response.iter_bytes():
                        f.write(chunk)
                partial.replace(target)
            finally:
                partial.unlink(missing_ok=True)
        return target


def _log_since(client: Client, run_id: str, since: int, series: str) -> tuple[list[str], int]:
    """Log lines of the run's live events after seq `since`, and the seq they go up to (the
    telemetry endpoint's gap-repair read, docs/live.md; its `log` is not in the schema's
    Telemetry component, so it is read from the raw answer)."""
    body = client.get_json(
        "/api/v1/runs/{id}/telemetry/",
        id=run_id,
        params={"since_seq": since, "max_points": 4, "series": series},
    )
    return [str(line) for line in body.get("log") or []], int(body["last_seq"])


def _overlap(seen: list[str], fresh: list[str]) -> int:
    """How many of `fresh`'s first lines are the last lines of `seen` (the tail and the
    first read after it may share a batch)."""
    for n in range(min(len(seen), len(fresh)), 0, -1):
        if seen[-n:] == fresh[:n]:
            return n
    return 0


def _filename(disposition: str) -> str:
    match = re.search(r"filename\*=UTF-8''([^;]+)", disposition) or re.search(
        r'filename="?([^";]+)"?', disposition
    )
    if not match:
        return ""
    name = os.path.basename(match.group(1).strip())
    return name if name not in ("", ".", "..") else ""


def _arrays(x: list[float], y: list[float]) -> Series:
    try:
        import numpy  # optional: arrays where it is installed
    except ImportError:
        return Series(x, y)
    return Series(numpy.asarray(x, dtype=float), numpy.asarray(y, dtype=float))


def _resume_body(
    *, iterations: int | None, time: str, settings: dict[str, dict[str, str]] | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"time": time}
    if iterations is not None:
        body["iterations"] = iterations
    if settings:
        body["settings"] = settings
    return body
