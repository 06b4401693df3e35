"""Test support: the clients that fixtures hand a test, each carrying the tenant it acts for
(never imported by the portal itself)."""

from __future__ import annotations

import httpx
from rest_framework.test import APIClient

from core.stack import Stack
from tenancy.models import Tenant


class TenantAPIClient(APIClient):
    """An API client signed in as a member of `tenant`."""

    tenant: Tenant


class LiveClient(httpx.Client):
    """An HTTP client of the running stack with the API token of a member of `tenant`
    (`stack`: the stack it talks to, where the fixture sets it)."""

    tenant: Tenant
    stack: Stack

    @property
    def token(self) -> str:
        """Its API token."""
        return str(self.headers["Authorization"]).split()[1]
