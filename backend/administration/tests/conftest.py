"""Fixtures of the admin app's tests."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient


@pytest.fixture
def ops(make_tenant):
    """A staff client (an operator) in a tenant of its own."""
    tenant = make_tenant("ops")
    tenant.user.is_staff = True
    tenant.user.save()
    client = APIClient()
    client.force_authenticate(tenant.user)
    return client
