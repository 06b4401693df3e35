"""Incremental parser for OpenFOAM solver logs (stdlib only; ships with the agent).

Feed it lines as they arrive; it returns ``(series, x, y)`` points when a time step is
complete (at ``ExecutionTime = …``, at the next ``Time = …``, at ``End`` or on `flush()`).
The x of a point is the solver ``Time`` of its step (0 before the first ``Time =`` line).
"""

from __future__ import annotations

import functools
import math
import re

__all__ = ["LogParser", "Point", "parse_number", "safe_series_name"]

Point = tuple[str, float, float]

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


class LogParser:
    """Turn solver log lines into telemetry points, one time step at a time."""

    def __init__(self) -> None:
        self.converged = False
        self.ended = False
        self.fatal_error: str | None = None
        self.last_time: float | None = None
        self.iterations = 0  # number of `Time = …` steps seen
        self._x = 0.0
        self._initial: dict[str, float] = {}
        self._final: dict[str, float] = {}
        self._scalars: dict[str, float] = {}
        self._emitted: set[str] = set()  # series already emitted for the current x
        self._fatal_lines: list[str] | None = None
        self._fatal_kind = ""

    # -- public -------------------------------------------------------------------------

    def feed(self, line: str) -> list[Point]:
        """Consume one log line; return the points it completes."""
        text = line.rstrip("\r\n")
        if text[:1] == "[":  # an MPI rank prefix
            text = _RANK_PREFIX.sub("", text)
        text = text.strip()
        if self._fatal_lines is not None:
            self._collect_fatal(text)
            return []
        if not text:
            return []
        # a solver writes thousands of lines: a cheap test picks the handler(s) worth trying,
        # in the same order as before (each returns None when the line is not its own)
        result = self._on_time(text) if text.startswith("Time = ") else None
        if result is None and "Solving for" in text:
            result = self._on_solve(text)
        if result is None and text.startswith("time step continuity"):
            result = self._on_continuity(text)
        if result is None and "Courant Number" in text:
            result = self._on_courant(text)
        if result is None and text.startswith("ExecutionTime"):
            result = self._on_execution(text)
        if result is None:
            result = self._on_other(text)
        return [] if result is None else result

    def flush(self) -> list[Point]:
        """Return the points of the step in progress (call at the end of the log)."""
        if self._fatal_lines is not None:
            self._finish_fatal()
        return self._emit()

    # -- line handlers: return None when the line is not theirs -----------------------------

    def _on_time(self, text: str) -> list[Point] | None:
        match = _TIME.match(text) if text.startswith("Time = ") else None
        if not match:
            return None
        try:
            value = parse_number(match.group(1))
        except ValueError:
            return None
        points = self._emit()
        self._x = value
        self.last_time = value
        self.iterations += 1
        self._emitted = set()
        return points

    def _on_solve(self, text: str) -> list[Point] | None:
        if "Solving for" not in text:
            return None
        match = _SOLVE.match(text)
        if not match:
            return []
        try:
            initial = _components(match.group("initial"))
            final = _components(match.group("final"))
        except ValueError:
            return []
        field = safe_series_name(match.group("field"))
        names = (
            [field]
            if len(initial) == 1
            else [f"{field}{_VECTOR_SUFFIXES[i] if i < 3 else i}" for i in range(len(initial))]
        )
        for name, first, last in zip(names, initial, final, strict=False):
            self._initial.setdefault(name, first)
            self._final[name] = last
        return []

    def _on_continuity(self, text: str) -> list[Point] | None:
        match = _CONTINUITY.match(text) if text.startswith("time step continuity") else None
        if not match:
            return None
        for key, raw in zip(("local", "global", "cumulative"), match.groups(), strict=True):
            self._set_scalar(f"continuity.{key}", raw)
        return []

    def _on_courant(self, text: str) -> list[Point] | None:
        match = _COURANT.match(text) if "Courant Number" in text else None
        if not match:
            return None
        prefix = "courant.interface" if match.group(1) else "courant"
        self._set_scalar(f"{prefix}.mean", match.group(2))
        self._set_scalar(f"{prefix}.max", match.group(3))
        return []

    def _on_execution(self, text: str) -> list[Point] | None:
        match = _EXECUTION.match(text) if text.startswith("ExecutionTime") else None
        if not match:
            return None
        self._set_scalar("execution.time", match.group(1))
        self._set_scalar("execution.clock", match.group(2))
        return self._emit()

    def _on_other(self, text: str) -> list[Point] | None:
        if text == "End":
            self.ended = True
            return self._emit()
        converged = _CONVERGED.search(text) if "converged in" in text else None
        if converged:
            self.converged = True
            return []
        fatal = _FATAL.match(text) if text.startswith("-->") else None
        if fatal:
            if self.fatal_error is None:
                self._fatal_kind = "FOAM FATAL IO ERROR" if fatal.group(1) else "FOAM FATAL ERROR"
                self._fatal_lines = [fatal.group(2)] if fatal.group(2) else []
            return []
        crash = _CRASH.search(text) if "::sig" in text else None
        if crash and self.fatal_error is None:
            self.fatal_error = _CRASH_NAMES[crash.group(1)]
        return None

    # -- helpers ------------------------------------------------------------------------

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

    def _emit(self) -> list[Point]:
        x = self._x
        points: list[Point] = []
        for prefix, values in (
            ("residual.", self._initial),
            ("residual_final.", self._final),
            ("", self._scalars),
        ):
            for name, y in values.items():
                series = prefix + name
                if series not in self._emitted:
                    points.append((series, x, y))
                    self._emitted.add(series)
        self._initial, self._final, self._scalars = {}, {}, {}
        return points
