"""Which tenant a user acts in."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.exceptions import PermissionDenied

from tenancy.selectors import tenant_for_member, tenant_for_user


def test_a_member_acts_in_their_tenant(make_tenant):
    tenant = make_tenant()
    assert tenant_for_user(user=tenant.user) == tenant
    assert tenant_for_member(user=tenant.user) == tenant


def test_a_user_in_no_tenant_has_none_and_is_refused_as_a_member(db):
    loner = get_user_model().objects.create_user("loner", password="pw-loner")
    assert tenant_for_user(user=loner) is None
    with pytest.raises(PermissionDenied, match="no tenant"):
        tenant_for_member(user=loner)
