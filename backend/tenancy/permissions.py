from rest_framework.permissions import BasePermission

from tenancy.selectors import tenant_for_user


class IsTenantMember(BasePermission):
    message = "You are signed in but belong to no tenant; ask an admin to add you to one."

    def has_permission(self, request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        tenant = tenant_for_user(user=request.user)
        if tenant is None:
            return False
        if not tenant.is_active:
            # per request: DRF builds the permission objects for each request
            self.message = (
                f"Your tenant {tenant.name} is deactivated: its studies and runs cannot be "
                "used or changed. Ask an operator to activate it again."
            )
            return False
        return True


class IsStaff(BasePermission):
    """Portal operators only (Django's is_staff), whatever their tenant."""

    message = (
        "This page is for Windtunnel operators (staff accounts) only; "
        "ask an operator if you need to see every tenant."
    )

    def has_permission(self, request, view) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and user.is_staff)
