"""Every operation of the API fuzzed from its own OpenAPI schema (schemathesis), as a
tenant's member and anonymously, against the running stack: no answer may be a 5xx, and
every documented answer must match its schema. Bounded here (WT_FUZZ_EXAMPLES cases per
operation, 20 by default); `make bench NAME=fuzz` runs it longer."""

from __future__ import annotations

import os

import pytest

from e2e.fuzzing import fuzz
from tenancy.services import api_token_create

EXAMPLES = int(os.environ.get("WT_FUZZ_EXAMPLES", "20"))


@pytest.mark.parametrize("who", ["member", "anonymous"])
def test_no_operation_answers_5xx_or_breaks_its_schema(live, who) -> None:
    token = api_token_create(user=live.tenant.user) if who == "member" else None
    result = fuzz(live.stack.url, token=token, examples=EXAMPLES)
    assert result.ok, result.output[-10000:]
    assert (
        result.cases > 50 * EXAMPLES
    )  # every operation was tried, not a schema that failed to load
