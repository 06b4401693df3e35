"""Admission policies are chosen by name; FIFO holds a tenant's queue at its quota."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from quotas.fit import Problem
from scheduler.policies import Fifo, policy_in_use


def test_the_configured_policy_is_used_and_an_unknown_one_is_a_clear_error(settings) -> None:
    assert isinstance(policy_in_use(), Fifo)
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "ADMISSION_POLICY": "lottery"}
    with pytest.raises(ImproperlyConfigured, match="known policies are fifo"):
        policy_in_use()


def test_fifo_stops_at_the_quota_but_lets_other_backends_runs_pass_a_full_backend() -> None:
    quota = Problem(limit="quota", resource="cores", where="", need=2, used=4, allowed=4)
    backend = Problem(limit="backend", resource="cores", where="b", need=2, used=4, allowed=4)
    cloud = Problem(limit="cloud", resource="cores", where="b", need=2, used=4, allowed=4)
    assert Fifo().blocks(quota) and not Fifo().blocks(backend) and not Fifo().blocks(cloud)
