"""Fuzzing the API from its own OpenAPI schema with schemathesis, for the tests
(e2e/test_fuzz.py, bounded) and the benchmark (bench/fuzz.py, longer).

Also schemathesis's hooks module (SCHEMATHESIS_HOOKS=e2e.fuzzing): the agent's result
archive is sent as application/gzip, which schemathesis has no serializer for.
"""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import schemathesis

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
# no 5xx; every documented answer matches its schema and content type
CHECKS = "not_a_server_error,response_schema_conformance,content_type_conformance"


@schemathesis.serializer("application/gzip")
def gzip_body(ctx: Any, value: Any) -> bytes:
    """Whatever was generated, as a gzip stream (a broken archive to the portal)."""
    data = value if isinstance(value, bytes) else str(value).encode()
    return gzip.compress(data)


class Fuzzed(NamedTuple):
    ok: bool
    cases: int  # test cases generated and sent
    output: str  # schemathesis's report (the failures, with curl commands to replay them)


# the operations in parts of about the same fuzzing time, which a test suite on several
# workers fuzzes side by side: (name, schemathesis's filter of the operations' paths, the
# phases to run, all when empty). The coverage phase (each field's boundaries and wrong
# types: thousands of bodies for a study's spec) runs where a body is read: a study's own
# operations answer its random ids 404 before reading any, and the preview reads the same
# spec as creating a study (whose boundaries "studies" covers) but throttles such a burst
# (429); they get the schema's examples, random cases and the stateful phase
PARTS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("admin", ("--include-path-regex", "^/api/v1/admin/"), ""),
    ("studies", ("--include-path-regex", "^/api/v1/studies/$"), ""),
    ("a study", ("--include-path-regex", "^/api/v1/studies/."), "examples,fuzzing,stateful"),
    ("the rest", ("--exclude-path-regex", "^/api/v1/(admin|studies)/"), ""),
)


def fuzz(
    url: str,
    *,
    token: str | None,
    examples: int,
    seed: int = 20261124,
    operations: tuple[str, ...] = (),
    phases: str = "",
) -> Fuzzed:
    """Every operation of the portal at `url` (or those `operations`, schemathesis's filter
    options, select: one of PARTS), `examples` cases each, with `token` (an API token) or
    anonymously; `phases`: schemathesis's phases to run (all when empty)."""
    argv = [
        str(SCHEMATHESIS),
        "run",
        f"{url}/api/schema/",
        "--checks",
        CHECKS,
        "--max-examples",
        str(examples),
        "--seed",
        str(seed),
        "--request-timeout",
        "30",
        "--no-color",
        *operations,
    ]
    if phases:
        argv += ["--phases", phases]
    if token:
        argv += ["--header", f"Authorization: Token {token}"]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "e2e.fuzzing"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600, check=False, env=env)
    found = re.search(r"(\d+) generated", done.stdout)
    return Fuzzed(
        done.returncode == 0, int(found.group(1)) if found else 0, done.stdout + done.stderr
    )
