"""Windtunnel's Python client: parametric OpenFOAM studies on a Windtunnel portal.

    from windtunnel import Client

    client = Client.from_env()            # WINDTUNNEL_URL + WINDTUNNEL_TOKEN, or `windtunnel login`
    study = client.submit("sweep.yaml")   # a spec: a dict, or a YAML/JSON file
    study.wait(progress=True)
    for row in study.results():
        print(row.parameters, row.objectives, row.trust)
    x, y = study.runs()[0].series("residual.p")

The command line is `windtunnel` (docs/cli.md); the library is described in docs/python.md.
"""

from .client import Client, __version__, load_spec
from .errors import (
    ApiError,
    AuthError,
    ConfigError,
    ExitCode,
    ServerError,
    UnavailableError,
    UsageError,
    WindtunnelError,
)
from .live import StudyEvent
from .models import Preview, ResultRow, Results, RunRecord, StudyRecord, Template, Upload
from .study import Run, Series, Study

__all__ = [
    "ApiError",
    "AuthError",
    "Client",
    "ConfigError",
    "ExitCode",
    "Preview",
    "ResultRow",
    "Results",
    "Run",
    "RunRecord",
    "Series",
    "ServerError",
    "Study",
    "StudyEvent",
    "StudyRecord",
    "Template",
    "UnavailableError",
    "Upload",
    "UsageError",
    "WindtunnelError",
    "__version__",
    "load_spec",
]
