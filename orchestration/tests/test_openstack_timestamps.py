"""When an OpenStack resource was made, however the API spells it."""

from __future__ import annotations

from types import SimpleNamespace

from orchestration.drivers.openstack.timestamps import created_at

EPOCH_2026 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def test_nova_heat_and_missing_timestamps() -> None:
    assert created_at(SimpleNamespace(created_at="2026-01-01T00:00:00Z")) == EPOCH_2026
    # Heat: no offset means UTC, and stacks may say creation_time instead
    assert created_at(SimpleNamespace(created_at="2026-01-01T00:00:00")) == EPOCH_2026
    assert created_at(SimpleNamespace(creation_time="2026-01-01T00:00:10Z")) == EPOCH_2026 + 10
    assert created_at(SimpleNamespace(created_at=None)) is None
    assert created_at(SimpleNamespace(created_at="yesterday")) is None
    assert created_at(object()) is None
