from rest_framework.permissions import BasePermission

from tenancy.selectors import tenant_for_user


class IsTenantMember(BasePermission):
    message = "You are signed in but belong to no tenant; ask an admin to add you to one."

    def has_permission(self, request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        return tenant_for_user(user=request.user) is not None


class IsStaff(BasePermission):
    """Portal operators only (Django's is_staff), whatever their tenant."""

    message = (
        "This page is for Windtunnel operators (staff accounts) only; "
        "ask an operator if you need to see every tenant."
    )

    def has_permission(self, request, view) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and user.is_staff)
