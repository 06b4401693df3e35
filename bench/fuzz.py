"""Fuzzing, longer than the test suite's: every operation of the API, from its own OpenAPI
schema (schemathesis, backend/e2e/fuzzing.py), 200 cases each as a tenant's member and as
much anonymously, against the portal's web process. Target: no 5xx and no answer that breaks
its schema (`fuzz_failures` 0). Baseline: none (a count, not a speed)."""

from __future__ import annotations

import time

from bench.common import emit, fresh_stack, progress, setup_django, sized

EXAMPLES = sized(200, 3)


def main() -> None:
    setup_django()
    from e2e.fuzzing import fuzz
    from quotas.services import tenant_provision
    from tenancy.services import api_token_create

    name = f"fuzz-{time.time_ns()}"
    tenant = tenant_provision(name=name, username=name, password=name + "-pw")
    user = tenant.memberships.get().user
    token = api_token_create(user=user)
    stack = fresh_stack()
    stack.start_web()
    try:
        failures, cases, started = 0, 0, time.monotonic()
        for who, key in (("member", token), ("anonymous", None)):
            progress(f"fuzzing every operation as {who}, {EXAMPLES} cases each")
            result = fuzz(stack.url, token=key, examples=EXAMPLES)
            cases += result.cases
            if not result.ok:
                failures += 1
                print(result.output[-20000:])
        emit(
            "fuzz_failures",
            failures,
            "runs failing",
            f"schemathesis, {cases:,} cases over every operation as a member and anonymously "
            f"({EXAMPLES} per operation), {time.monotonic() - started:.0f} s; target 0",
            cases=cases,
        )
    finally:
        stack.stop()
    if failures:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
