"""The live view of a study: a progress bar of its runs by state, and the residuals of its
slowest running run as sparklines (rich)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .models import RUN_STATES, STUDY_TERMINAL_STATES, RunRecord, StudyRecord

if TYPE_CHECKING:
    from .client import Client

BLOCKS = "▁▂▃▄▅▆▇█"
#: how each run state shows in the bar and its legend
STYLES = {
    "completed": "green",
    "failed": "red",
    "cancelled": "yellow",
    "running": "cyan",
    "provisioning": "blue",
    "admitted": "blue",
    "pending": "grey50",
}
#: and without colours
GLYPHS = {
    "completed": "━",
    "failed": "╳",
    "cancelled": "╌",
    "running": "╍",
    "provisioning": "╍",
    "admitted": "╍",
    "pending": "─",
}
BAR_WIDTH = 40
SPARK_WIDTH = 40
MAX_RESIDUALS = 6


def sparkline(values: Sequence[float | None], width: int = SPARK_WIDTH, *, log: bool = True) -> str:
    """`values` as one line of block characters, `width` wide at most (each character the
    mean of its share of the values; on a log scale for residuals). Blank where a value is
    missing, NaN or, on a log scale, not positive."""
    if not values:
        return ""
    width = max(1, min(width, len(values)))
    cells: list[float | None] = []
    for i in range(width):
        part = values[i * len(values) // width : (i + 1) * len(values) // width]
        good = [
            math.log10(v) if log else v
            for v in part
            if v is not None and math.isfinite(v) and (v > 0 or not log)
        ]
        cells.append(sum(good) / len(good) if good else None)
    known = [c for c in cells if c is not None]
    if not known:
        return " " * width
    low, high = min(known), max(known)
    span = high - low or 1.0
    top = len(BLOCKS) - 1
    return "".join(" " if c is None else BLOCKS[round((c - low) / span * top)] for c in cells)


def state_bar(by_state: dict[str, int], total: int, width: int = BAR_WIDTH) -> Text:
    """A bar `width` wide, split by run state in the order runs go through them."""
    total = max(total, sum(by_state.values()), 1)
    bar = Text()
    used = 0
    shown = 0
    for state in (*RUN_STATES[4:], *reversed(RUN_STATES[:4])):  # ended first, then active
        shown += by_state.get(state, 0)
        end = round(shown / total * width)
        if end > used:
            bar.append(GLYPHS[state] * (end - used), style=STYLES.get(state, ""))
            used = end
    if used < width:
        bar.append("─" * (width - used), style="grey35")
    return bar


def legend(by_state: dict[str, int]) -> Text:
    """`2 completed · 1 running · 3 pending`: the states that have runs."""
    text = Text()
    for state in RUN_STATES:
        count = by_state.get(state, 0)
        if count:
            if text:
                text.append(" · ", style="grey50")
            text.append(f"{count} {state}", style=STYLES.get(state, ""))
    return text


def elapsed(record: StudyRecord) -> str:
    """How long the study has run (until it ended), as h:mm:ss or m:ss."""
    start = _when(record.submitted_at) or _when(record.created_at)
    end = _when(record.finished_at) or datetime.now(UTC)
    seconds = max(0, int((end - start).total_seconds())) if start else 0
    hours, rest = divmod(seconds, 3600)
    return (f"{hours}:" if hours else "") + f"{rest // 60:02d}:{rest % 60:02d}"[0 if hours else 1 :]


def _when(value: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if value else None
    except ValueError:
        return None


class StudyMonitor:
    """What the live view shows, refreshed from the portal at most every `interval` s: the
    study's runs by state, and the residuals of its slowest running run (the one that has
    been running longest; after it ends, its last residuals stay)."""

    def __init__(self, client: Client, record: StudyRecord, *, interval: float = 1.5) -> None:
        self.client = client
        self.record = record
        self.state = record.state
        self.by_state = dict(record.progress.by_state)
        self.interval = interval
        self.slowest: RunRecord | None = None
        self.residuals: dict[str, list[float | None]] = {}
        self._names: dict[str, list[str]] = {}
        self._last = 0.0
        self._settled = False
        self._shown = ""

    def apply(self, *, state: str, by_state: dict[str, int], record: StudyRecord | None) -> None:
        """A change the study's stream told."""
        self.state = state
        self.by_state = dict(by_state)
        if record is not None:
            self.record = record

    def refresh(self, *, force: bool = False) -> None:
        """Load the slowest run and its residuals again (at most every `interval` s)."""
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        if self.state in STUDY_TERMINAL_STATES:
            if self._settled:
                return
            # the study ended: its slowest run is the one that ran longest
            ended = [r for r in self.client.study_runs(self.record.id) if r.started_at]
            if ended:
                self.slowest = max(ended, key=lambda r: r.wall_seconds or 0.0)
            self._settled = True
        else:
            # while it runs: the running run that started first
            running = self.client.study_runs(self.record.id, state="running")
            if running:
                self.slowest = min(running, key=lambda r: (r.started_at or "~", r.index))
        if self.slowest is None:
            return
        run_id = self.slowest.id
        if run_id != self._shown:
            self._shown, self.residuals = run_id, {}  # another run: not its predecessor's
        names = self._names.get(run_id)
        if not names:
            available = self.client.telemetry(run_id, max_points=4).available
            names = [n for n in available if n.startswith("residual.")][:MAX_RESIDUALS]
            self._names[run_id] = names
        if names:
            series = self.client.telemetry(run_id, series=names, max_points=2 * SPARK_WIDTH)
            self.residuals = {
                name: list(series.series[name]["y"]) for name in names if name in series.series
            }

    def __rich__(self) -> RenderableType:
        total = self.record.run_count or sum(self.by_state.values())
        ended = sum(self.by_state.get(s, 0) for s in ("completed", "failed", "cancelled"))
        header = Text.assemble(
            (self.record.name, "bold"),
            "  ",
            (self.state, STYLES.get(self.state.replace("completed_with_failures", "failed"), "")),
            f"  {ended}/{total} done  {elapsed(self.record)}",
        )
        parts: list[RenderableType] = [
            header,
            Text.assemble(state_bar(self.by_state, total), "  ", legend(self.by_state)),
        ]
        run = self.slowest
        if run is not None:
            params = ", ".join(f"{k}={v}" for k, v in run.parameters.items())
            where = f"t={run.last_time:g}" if run.last_time is not None else run.phase
            parts.append(
                Text.assemble(
                    ("slowest run ", "grey50"),
                    f"#{run.index}",
                    f" ({params})" if params else "",
                    "  ",
                    (run.state, STYLES.get(run.state, "")),
                    f"  {where}" if where else "",
                )
            )
            grid = Table.grid(padding=(0, 2))
            for name, ys in self.residuals.items():
                last = next((y for y in reversed(ys) if y is not None), None)
                grid.add_row(
                    Text(name, style="grey70"),
                    Text(sparkline(ys), style="cyan"),
                    Text(f"{last:.2e}" if last is not None else "—"),
                )
            parts.append(grid)
        return Group(*parts)
