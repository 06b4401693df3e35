"""Incremental parser for OpenFOAM solver logs (stdlib only; ships with the agent).

Feed it text as it arrives: `feed_block()` takes whole lines joined by newlines and returns
the points they complete as columns (``{series: ([x, …], [y, …])}``), `feed()` takes one line
and returns ``(series, x, y)`` tuples. A point is complete when its time step is (at
``ExecutionTime = …``, at the next ``Time = …``, at ``End`` or on `flush()`). The x of a point
is the solver ``Time`` of its step (0 before the first ``Time =`` line).

A solver writes about ten lines per time step, so `feed_block()` takes the lines it knows the
shape of (time, residuals, continuity, Courant number, execution time, blank) on a fast path
of plain string operations and hands every other line to the line parser, which decides what
it is with regular expressions. Both give the same points (a test feeds the same logs, and
mangled lines, both ways).
"""

from __future__ import annotations

import functools
import math
import re

__all__ = ["Columns", "LogParser", "Point", "parse_number", "safe_series_name"]

Point = tuple[str, float, float]
Columns = dict[str, tuple[list[float], list[float]]]  # series → (xs, ys)

_RANK_PREFIX = re.compile(r"^(?:\[\d+\]\s?)+")
_TIME = re.compile(r"^Time = (\S+?)s?$")
_SOLVE = re.compile(
    r"^(?P<solver>\S[^:]*):\s+Solving for (?P<field>[^,]+), "
    r"Initial residual = (?P<initial>\([^)]*\)|[^,]+), "
    r"Final residual = (?P<final>\([^)]*\)|[^,]+), "
    r"No Iterations (?P<iterations>.+)$"
)
_CONTINUITY = re.compile(
    r"^time step continuity errors : sum local = ([^,\s]+), global = ([^,\s]+), "
    r"cumulative = (\S+)"
)
_COURANT = re.compile(r"^(Interface )?Courant Number mean: (\S+) max: (\S+)")
_EXECUTION = re.compile(r"^ExecutionTime = (\S+) s\s+ClockTime = (\S+) s")
_CONVERGED = re.compile(r"solution converged in (\d+) iterations")
_FATAL = re.compile(r"^-->\s*FOAM FATAL (IO )?ERROR:?\s*(.*)$")
_FATAL_END = re.compile(r"^(From function|FOAM (parallel run )?(exiting|aborting)|in file )")
_CRASH = re.compile(r"Foam::sig(Fpe|Segv|Int|Quit|Term)::sigHandler")
_CRASH_NAMES = {
    "Fpe": "floating point exception (sigFpe)",
    "Segv": "segmentation fault (sigSegv)",
    "Int": "interrupted (sigInt)",
    "Quit": "quit (sigQuit)",
    "Term": "terminated (sigTerm)",
}
_VECTOR_SUFFIXES = ("x", "y", "z")
_MAX_FATAL_LINES = 20
_MAX_FATAL_CHARS = 2000

_CONTINUITY_NAMES = ("continuity.local", "continuity.global", "continuity.cumulative")
_COURANT_NAMES = (
    ("courant.mean", "courant.max"),
    ("courant.interface.mean", "courant.interface.max"),
)


def parse_number(text: str) -> float:
    """OpenFOAM's number spellings (``nan``, ``-nan``, ``inf``, ``1e-05``) as a float."""
    try:
        return float(text)  # the common case; float() ignores surrounding whitespace
    except ValueError:
        pass
    text = text.strip().rstrip(",;")
    try:
        return float(text)
    except ValueError:
        lowered = text.lower().lstrip("+-")
        if lowered in ("nan", "nan(ind)", "1.#ind", "1.#qnan"):
            return math.nan
        if lowered in ("inf", "infinity", "1.#inf"):
            return -math.inf if text.startswith("-") else math.inf
        raise


@functools.lru_cache(maxsize=4096)
def safe_series_name(name: str) -> str:
    """Series names keep OpenFOAM's spelling; whitespace becomes `_`."""
    return re.sub(r"\s+", "_", name.strip())


def _components(text: str) -> list[float]:
    if text.startswith("("):
        return [parse_number(part) for part in text.strip("()").split()]
    return [parse_number(text)]


_FIELD_NAMES: dict[tuple[str, int], tuple[tuple[str, str], ...]] = {}


@functools.lru_cache(maxsize=1024)
def _field_names(field: str, size: int) -> tuple[tuple[str, str], ...]:
    """(residual.<name>, residual_final.<name>) per component of a solved field."""
    base = safe_series_name(field)
    names = (
        [base]
        if size == 1
        else [f"{base}{_VECTOR_SUFFIXES[i] if i < 3 else i}" for i in range(size)]
    )
    return tuple((f"residual.{n}", f"residual_final.{n}") for n in names)


class LogParser:
    """Turn solver log lines into telemetry points, one time step at a time."""

    def __init__(self) -> None:
        self.converged = False
        self.ended = False
        self.fatal_error: str | None = None
        self.last_time: float | None = None
        # time steps the solver finished: a `Time = …` step counts once its ExecutionTime line,
        # the next step or End closes it; one a crash or fatal error cut short does not
        self.iterations = 0
        self._step_open = False
        self._x = 0.0
        # the step in progress, by series name: first initial residual, last final residual,
        # last value of every other series
        self._initial: dict[str, float] = {}
        self._final: dict[str, float] = {}
        self._scalars: dict[str, float] = {}
        self._emitted: set[str] = set()  # series already emitted for the current x
        self._out: Columns = {}  # completed points not yet handed out
        self._fatal_lines: list[str] | None = None
        self._fatal_kind = ""

    # -- public -------------------------------------------------------------------------

    def feed(self, line: str) -> list[Point]:
        """Consume one log line; return the points it completes."""
        self._line(line)
        return self._take_points()

    def feed_block(self, text: str) -> Columns:
        """Consume whole lines joined by newlines; return the points they complete.

        A line without surrounding whitespace is what the line parser sees after stripping,
        so the fast path applies the line parser's own regular expressions to it, in the
        line parser's order, minus the per-line calls; anything else goes to `_line`."""
        slow = self._line
        if self._fatal_lines is not None or "\r" in text:
            for line in text.split("\n"):
                slow(line)
            return self._take()
        solve, continuity, courant = _SOLVE.match, _CONTINUITY.match, _COURANT.match
        execution = _EXECUTION.match
        names_of = _FIELD_NAMES
        scalars = self._scalars
        lines = iter(text.split("\n"))
        for line in lines:
            if not line:
                continue
            head, tail = line[0], line[-1]
            if (
                head <= " "
                or tail <= " "
                or head == "["
                or head == "-"
                or (head >= "\x7f" and head.isspace())
                or (tail >= "\x7f" and tail.isspace())
            ):
                slow(line)
            elif head == "T" and line.startswith("Time = "):
                if not self._on_time(line):
                    slow(line)
            elif "Solving for" in line:
                match = solve(line)
                if match is None:
                    continue  # the line parser takes it and keeps nothing
                field, first, last = match.group(2, 3, 4)  # field, initial, final
                initial, final = self._initial, self._final
                if first[0] != "(" and last[0] != "(":  # a scalar field: the common case
                    try:
                        value, last_value = float(first), float(last)
                    except ValueError:
                        pass
                    else:
                        names = names_of.get((field, 1))
                        if names is None:
                            names = names_of[(field, 1)] = _field_names(field, 1)
                        first_name, final_name = names[0]
                        if first_name not in initial:
                            initial[first_name] = value
                        final[final_name] = last_value
                        continue
                try:
                    firsts, lasts = _components(first), _components(last)
                except ValueError:
                    continue
                names = names_of.get((field, len(firsts)))
                if names is None:
                    names = names_of[(field, len(firsts))] = _field_names(field, len(firsts))
                for (first_name, final_name), value, last_value in zip(
                    names, firsts, lasts, strict=False
                ):
                    if first_name not in initial:
                        initial[first_name] = value
                    final[final_name] = last_value
            elif head == "t" and line.startswith("time step continuity"):
                match = continuity(line)
                if match is None:
                    slow(line)
                else:
                    local, glob, cumulative = match.groups()
                    try:
                        scalars["continuity.local"] = float(local)
                        scalars["continuity.global"] = float(glob)
                        scalars["continuity.cumulative"] = float(cumulative)
                    except ValueError:
                        for key, raw in zip(_CONTINUITY_NAMES, match.groups(), strict=True):
                            self._set_scalar(key, raw)
            elif "Courant Number" in line:
                match = courant(line)
                if match is None:
                    slow(line)
                else:
                    interface, mean, high = match.groups()
                    mean_name, max_name = _COURANT_NAMES[bool(interface)]
                    try:
                        scalars[mean_name] = float(mean)
                        scalars[max_name] = float(high)
                    except ValueError:
                        self._set_scalar(mean_name, mean)
                        self._set_scalar(max_name, high)
            elif head == "E":
                match = execution(line) if line != "End" else None
                if match is None:
                    slow(line)
                else:
                    clock, wall = match.groups()
                    try:
                        scalars["execution.time"] = float(clock)
                        scalars["execution.clock"] = float(wall)
                    except ValueError:
                        self._set_scalar("execution.time", clock)
                        self._set_scalar("execution.clock", wall)
                    self._end_step()
                    self._emit()
            elif "converged in" in line or "::sig" in line:
                slow(line)
            else:
                continue  # no handler takes it: the line parser would ignore it too
            if self._fatal_lines is not None:  # a fatal error's message spans lines
                for rest in lines:
                    slow(rest)
            scalars = self._scalars
        return self._take()

    def flush(self) -> list[Point]:
        """Return the points of the step in progress (call at the end of the log)."""
        self._flush()
        return self._take_points()

    def flush_block(self) -> Columns:
        """As `flush()`, as columns."""
        self._flush()
        return self._take()

    # -- the line parser ----------------------------------------------------------------

    def _line(self, line: str) -> None:
        text = line.rstrip("\r\n")
        if text[:1] == "[":  # an MPI rank prefix
            text = _RANK_PREFIX.sub("", text)
        text = text.strip()
        if self._fatal_lines is not None:
            self._collect_fatal(text)
            return
        if not text:
            return
        # a cheap test picks the handler(s) worth trying, in this order (each returns False
        # when the line is not its own)
        if text.startswith("Time = ") and self._on_time(text):
            return
        if "Solving for" in text:
            self._on_solve(text)
            return
        if text.startswith("time step continuity") and self._on_continuity(text):
            return
        if "Courant Number" in text and self._on_courant(text):
            return
        if text.startswith("ExecutionTime") and self._on_execution(text):
            return
        self._on_other(text)

    def _on_time(self, text: str) -> bool:
        match = _TIME.match(text)
        if not match:
            return False
        try:
            value = parse_number(match.group(1))
        except ValueError:
            return False
        self._start_step(value)
        return True

    def _on_solve(self, text: str) -> None:
        match = _SOLVE.match(text)
        if not match:
            return
        try:
            initial = _components(match.group("initial"))
            final = _components(match.group("final"))
        except ValueError:
            return
        names = _field_names(match.group("field"), len(initial))
        for (first_name, final_name), first, last in zip(names, initial, final, strict=False):
            self._initial.setdefault(first_name, first)
            self._final[final_name] = last

    def _on_continuity(self, text: str) -> bool:
        match = _CONTINUITY.match(text)
        if not match:
            return False
        for key, raw in zip(_CONTINUITY_NAMES, match.groups(), strict=True):
            self._set_scalar(key, raw)
        return True

    def _on_courant(self, text: str) -> bool:
        match = _COURANT.match(text)
        if not match:
            return False
        prefix = "courant.interface" if match.group(1) else "courant"
        self._set_scalar(f"{prefix}.mean", match.group(2))
        self._set_scalar(f"{prefix}.max", match.group(3))
        return True

    def _on_execution(self, text: str) -> bool:
        match = _EXECUTION.match(text)
        if not match:
            return False
        self._set_scalar("execution.time", match.group(1))
        self._set_scalar("execution.clock", match.group(2))
        self._end_step()
        self._emit()
        return True

    def _on_other(self, text: str) -> None:
        if text == "End":
            self.ended = True
            self._end_step()
            self._emit()
            return
        if "converged in" in text and _CONVERGED.search(text):
            self.converged = True
            return
        fatal = _FATAL.match(text) if text.startswith("-->") else None
        if fatal:
            if self.fatal_error is None:
                self._fatal_kind = "FOAM FATAL IO ERROR" if fatal.group(1) else "FOAM FATAL ERROR"
                self._fatal_lines = [fatal.group(2)] if fatal.group(2) else []
            return
        crash = _CRASH.search(text) if "::sig" in text else None
        if crash and self.fatal_error is None:
            self.fatal_error = _CRASH_NAMES[crash.group(1)]

    # -- helpers ------------------------------------------------------------------------

    def _start_step(self, value: float) -> None:
        self._emit()
        self._end_step()
        self._step_open = True
        self._x = value
        self.last_time = value
        self._emitted = set()

    def _end_step(self) -> None:
        """The step in progress finished: counted once."""
        if self._step_open:
            self.iterations += 1
            self._step_open = False

    def _set_scalar(self, name: str, raw: str) -> None:
        try:
            self._scalars[name] = parse_number(raw)
        except ValueError:
            pass

    def _collect_fatal(self, text: str) -> None:
        assert self._fatal_lines is not None
        if _FATAL_END.match(text) or len(self._fatal_lines) >= _MAX_FATAL_LINES:
            self._finish_fatal()
        elif text:
            self._fatal_lines.append(text)

    def _finish_fatal(self) -> None:
        message = " ".join(self._fatal_lines or []).strip()
        self.fatal_error = f"{self._fatal_kind}: {message}"[:_MAX_FATAL_CHARS]
        self._fatal_lines = None

    def _flush(self) -> None:
        if self._fatal_lines is not None:
            self._finish_fatal()
        self._emit()

    def _emit(self) -> None:
        """The step's values become points (each series once per x)."""
        x, out, emitted = self._x, self._out, self._emitted
        for values in (self._initial, self._final, self._scalars):
            if not values:
                continue
            if emitted and not emitted.isdisjoint(values):
                values = {k: v for k, v in values.items() if k not in emitted}
            for series, y in values.items():
                columns = out.get(series)
                if columns is None:
                    columns = out[series] = ([], [])
                columns[0].append(x)
                columns[1].append(y)
            emitted.update(values)
        self._initial, self._final, self._scalars = {}, {}, {}

    def _take(self) -> Columns:
        out, self._out = self._out, {}
        return out

    def _take_points(self) -> list[Point]:
        if not self._out:
            return []
        return [
            (series, x, y)
            for series, (xs, ys) in self._take().items()
            for x, y in zip(xs, ys, strict=True)
        ]
