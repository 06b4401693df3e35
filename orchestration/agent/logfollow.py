"""Following a step's log: its banner, its new lines as they are written.

Stdlib only (the run agent's).
"""

from __future__ import annotations

import os

from orchestration.agent.reporter import Reporter
from orchestration.results.logparse import LogParser

TYPE_CHECKING = False  # typing is not imported at run time (every Slurm job starts an agent)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["LogFollower", "LogWrites", "log_header", "log_header_text"]


def log_header(path: str) -> dict[str, Any]:
    """log_header_text of the start of the log file `path` (one of the caller's own)."""
    try:
        with open(path, "rb") as fh:
            return log_header_text(fh.read(8192))
    except OSError:
        return {}


def log_header_text(head: bytes) -> dict[str, Any]:
    """What an OpenFOAM log's banner says of the program's build and where it ran: `build`
    (e.g. "OPENFOAM=1912 patch=200626"), `version` (when the banner names one), `host`,
    `hosts` (a parallel run's, with their process counts) and `processes`; {} for a log
    without the banner. `head`: the log's first 8 kB."""
    text = head.decode("utf-8", errors="replace")
    out: dict[str, Any] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        key, sep, value = line.partition(":")
        key, value = key.strip(" |\\/"), value.strip(" |")
        if "Version" in line and "Version:" in line and not out.get("version"):
            version = line.split("Version:", 1)[1].strip(" |")
            if version:
                out["version"] = version
        elif sep and key == "Build":
            out["build"] = value
        elif sep and key == "Host":
            out["host"] = value.strip('"')
        elif sep and key == "nProcs":
            out["processes"] = int(value) if value.isdigit() else value
        elif sep and key == "Hosts":
            hosts = []
            for entry in lines[i + 1 : i + 200]:
                entry = entry.strip()
                if entry == ")":
                    break
                if entry.startswith("(") and entry.endswith(")") and len(entry) > 2:
                    hosts.append(entry.strip("()").strip('"').split()[0])
            out["hosts"] = hosts
    return out


class LogWrites:
    """A file descriptor that becomes readable when a file is written (Linux inotify, by
    ctypes): a watched run's new log line is read when it is written, not at the next poll
    (up to half a telemetry interval later, the largest part of a line's way to a browser
    after the batching). `open` gives None where inotify is not to be had; the polls go on."""

    IN_MODIFY = 0x2

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def open(cls, path: str) -> LogWrites | None:
        try:
            import ctypes  # only for a watched run: every Slurm job starts an agent

            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError, ImportError):
            return None
        if fd < 0:
            return None
        if libc.inotify_add_watch(fd, os.fsencode(path), cls.IN_MODIFY) < 0:
            os.close(fd)
            return None
        return cls(fd)

    def drain(self) -> None:
        """Forget the events so far (what they announce is about to be read)."""
        try:
            while os.read(self.fd, 4096):
                pass
        except OSError:  # EAGAIN: none left
            pass

    def close(self) -> None:
        os.close(self.fd)


class LogFollower:
    """Reads what a step appended to its log since the last call: whole lines go to the
    parser and the live log, a partial last line waits for its end.

    The log is read through `fd`, the descriptor the agent made the file with (the step
    writes through its own copy), at offsets of its own (pread): never reopened by name, so
    a step that replaces its log with a link to a host file shows nothing of that file."""

    CHUNK = 1 << 20

    def __init__(self, fd: int, parser: LogParser, reporter: Reporter, *, solve: bool) -> None:
        self.fd = fd
        self.path = f"/proc/self/fd/{fd}"  # the file itself, for a watch (LogWrites.open)
        self.parser = parser
        self.reporter = reporter
        self.solve = solve
        self.offset = 0
        self.partial = b""

    def poll(self, *, final: bool = False) -> None:
        try:
            while True:
                data = os.pread(self.fd, self.CHUNK, self.offset)
                if not data:
                    break
                self.offset += len(data)
                self._feed(self.partial + data)
        except OSError:
            return
        if final and self.partial:
            self._lines(self.partial)
            self.partial = b""

    def _feed(self, data: bytes) -> None:
        cut = data.rfind(b"\n")
        self.partial = data[cut + 1 :]
        if cut >= 0:
            self._lines(data[:cut])

    def _lines(self, block: bytes) -> None:
        """Whole lines (joined by newlines, decoded and parsed at once: a solver writes
        thousands)."""
        text = block.decode("utf-8", "replace")
        if "\r" in text:
            text = "\n".join(line.rstrip("\r") for line in text.split("\n"))
        columns = self.parser.feed_block(text)
        if self.solve and columns:
            self.reporter.add_columns(columns)
        if self.solve and self.parser.iterations:
            self.reporter.set_iterations(self.parser.iterations)
        self.reporter.add_log_text(text)
