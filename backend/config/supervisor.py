"""`make run`'s process supervisor: supervisord keeps the web server, the Celery worker and beat up.

A crashed process is restarted and supervisord's log says why (its exit status or signal); the
others keep running. Ctrl-C (SIGINT) or SIGTERM stops all three: the worker gets Celery's warm
shutdown (`stopwaitsecs`), then its whole process group is killed.

    python -m config.supervisor --port 8000 [--check]   # writes .data/supervisord.conf and
                                                       # runs supervisord in the foreground

`supervisorctl -c .data/supervisord.conf status` (or `restart worker`) talks to the running one.
Production runs the same three processes under systemd or compose instead (docs/deploy.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# what every program of the portal gets: a stop that lets it finish (a worker's warm shutdown
# waits for its tasks), restarts after any exit, and no flapping: a process that dies within
# `startsecs` of its start counts as a failed start, tried `startretries` times with back-off
PROGRAM_DEFAULTS = {
    "autostart": "true",
    "autorestart": "true",
    "startsecs": "3",
    "startretries": "5",
    "stopsignal": "TERM",
    "stopwaitsecs": "20",
    "stopasgroup": "true",
    "killasgroup": "true",
    "redirect_stderr": "true",
    "stdout_logfile_maxbytes": "50MB",
    "stdout_logfile_backups": "3",
}


@dataclass(frozen=True)
class Layout:
    """Where `make run` keeps what supervisord needs, all under the data directory."""

    data: Path
    port: int
    python: Path
    bin: Path

    @property
    def conf(self) -> Path:
        return self.data / "supervisord.conf"

    @property
    def logs(self) -> Path:
        return self.data / "logs"

    @property
    def socket(self) -> Path:
        return self.data / "supervisor.sock"


def _escape(value: str) -> str:
    # supervisord expands %(name)s in its values: a literal % is written %%
    return value.replace("%", "%%")


def supervisor_programs(*, layout: Layout) -> dict[str, list[str]]:
    """The portal's processes, each a command line (no shell: nothing is interpolated)."""
    return {
        "web": [
            str(layout.bin / "uvicorn"),
            "config.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(layout.port),
            "--log-level",
            "warning",
        ],
        "worker": [
            str(layout.bin / "celery"),
            "-A",
            "config",
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            "4",
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        "beat": [
            str(layout.bin / "celery"),
            "-A",
            "config",
            "beat",
            "--loglevel",
            "INFO",
            "--schedule",
            str(layout.data / "celerybeat-schedule"),
        ],
    }


def supervisor_conf(*, layout: Layout) -> str:
    """supervisord's configuration for the portal, as text."""
    lines = [
        "; written by `python -m config.supervisor` (make run); edits are overwritten",
        "[supervisord]",
        "nodaemon=true",
        f"logfile={_escape(str(layout.logs / 'supervisord.log'))}",
        "logfile_maxbytes=10MB",
        "loglevel=info",
        f"pidfile={_escape(str(layout.data / 'supervisord.pid'))}",
        f"directory={_escape(str(ROOT))}",
        "",
        "[unix_http_server]",
        f"file={_escape(str(layout.socket))}",
        "chmod=0700",
        "",
        "[supervisorctl]",
        f"serverurl=unix://{_escape(str(layout.socket))}",
        "",
        "[rpcinterface:supervisor]",
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
        "",
    ]
    for name, argv in supervisor_programs(layout=layout).items():
        lines.append(f"[program:{name}]")
        lines.append("command=" + " ".join(_escape(_quote(a)) for a in argv))
        lines.append(f"directory={_escape(str(ROOT))}")
        lines.append(f"stdout_logfile={_escape(str(layout.logs / f'{name}.log'))}")
        lines.extend(f"{key}={value}" for key, value in PROGRAM_DEFAULTS.items())
        lines.append("")
    return "\n".join(lines)


def _quote(arg: str) -> str:
    # supervisord splits `command` with shlex: quote what has spaces or quotes
    if not arg or any(c in arg for c in " \t\"'\\"):
        return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return arg


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument(
        "--data", type=Path, default=ROOT / ".data", help="where the config, socket and logs go"
    )
    parser.add_argument(
        "--write-only", action="store_true", help="write the configuration and exit"
    )
    args = parser.parse_args(argv)
    bin_dir = Path(sys.executable).parent
    layout = Layout(
        data=args.data.resolve(), port=args.port, python=Path(sys.executable), bin=bin_dir
    )
    layout.logs.mkdir(parents=True, exist_ok=True)
    layout.conf.write_text(supervisor_conf(layout=layout))
    if args.write_only:
        print(layout.conf)
        return
    supervisord = bin_dir / "supervisord"
    os.execv(supervisord, [str(supervisord), "-c", str(layout.conf)])


if __name__ == "__main__":
    main()
