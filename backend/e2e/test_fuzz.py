"""Every operation of the API fuzzed from its own OpenAPI schema (schemathesis), as a
tenant's member and anonymously, against the running stack: no answer may be a 5xx, and
every documented answer must match its schema. `make bench NAME=fuzz` runs it longer.

Bounded, and the same cases every run (a fixed seed, e2e.fuzzing): schemathesis's four
phases each try every operation (97 of them, every path and method): the schema's examples;
the coverage phase, whose cases the schema alone fixes (each field's boundaries and wrong
types, each method a path does not take: most of the time); the fuzzing phase,
WT_FUZZ_EXAMPLES random cases per operation (10 by default); and the stateful phase, which
follows the schema's links. The member fuzzes the operations in parts (e2e.fuzzing.PARTS),
each a test of its own, so pytest-xdist workers take them side by side; where no body is
read (a study's operations, for a study that is not there) the coverage phase is left out,
as for the anonymous caller (e2e.fuzzing.PARTS says why).

An anonymous caller is answered 401 before anything it sends is read, and can make nothing
for the stateful phase to follow: it gets the schema's examples and the random cases (its
paths and query strings still reach the routing and the authentication), not the coverage
phase's thousands of boundary bodies that no view would read."""

from __future__ import annotations

import os

import pytest

from e2e.fuzzing import PARTS, fuzz
from tenancy.services import api_token_create

EXAMPLES = int(os.environ.get("WT_FUZZ_EXAMPLES", "10"))
ANONYMOUS_PHASES = "examples,fuzzing"


# the member's four parts, and the anonymous caller's every operation in one go
CALLS = [("member", name, part, phases) for name, part, phases in PARTS] + [
    ("anonymous", "all", (), ANONYMOUS_PHASES)
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("who", "part", "phases"),
    [(who, part, phases) for who, _, part, phases in CALLS],
    ids=[f"{w}-{n}" for w, n, _, _ in CALLS],
)
def test_no_operation_answers_5xx_or_breaks_its_schema(live, who, part, phases) -> None:
    token = api_token_create(user=live.tenant.user) if who == "member" else None
    result = fuzz(live.stack.url, token=token, examples=EXAMPLES, operations=part, phases=phases)
    assert result.ok, result.output[-10000:]
    # every operation of the part was tried, not a schema that failed to load or a filter
    # that matched nothing
    assert result.cases > 5 * EXAMPLES, result.output[-3000:]
