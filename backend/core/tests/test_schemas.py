"""Schema validation (core/schemas.py) as the web process meets it: many threads at once."""

from __future__ import annotations

import pytest

from core.exceptions import ApplicationError


def test_a_validator_is_made_once_however_many_threads_ask_for_it_at_once(
    tmp_path, monkeypatch
) -> None:
    """20 agents' first reports reach a fresh web process together: one thread makes the
    validator and the others wait for it (each had made its own, half a second in all)."""
    import threading

    from core import schemas

    path = tmp_path / "messages.json"
    path.write_text(
        '{"$defs": {"Ping": {"type": "object", "required": ["n"],'
        ' "properties": {"n": {"type": "integer"}}}}}'
    )
    made = []
    real = schemas.Draft202012Validator

    def counting(schema):
        made.append(schema)
        return real(schema)

    counting.check_schema = real.check_schema  # type: ignore[attr-defined]
    monkeypatch.setattr(schemas, "Draft202012Validator", counting)
    barrier = threading.Barrier(20)
    errors = []

    def check(n):
        barrier.wait()
        try:
            schemas.validate(path, {"n": n}, definition="Ping")
        except Exception as exc:  # a wrong answer would show here
            errors.append(exc)

    threads = [threading.Thread(target=check, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(made) == 1
    # prepare() makes the whole schema's and each definition's at once, before anyone asks
    other = tmp_path / "other.json"
    other.write_text(path.read_text())
    schemas.prepare(other)
    assert len(made) == 3  # the schema itself and its one definition
    schemas.validate(other, {"n": 1}, definition="Ping")
    assert len(made) == 3
    with pytest.raises(ApplicationError) as refused:
        schemas.validate(other, {"n": "one"}, definition="Ping")
    assert refused.value.field == "n"
