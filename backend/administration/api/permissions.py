from rest_framework.permissions import BasePermission


class IsStaff(BasePermission):
    """Portal operators only (Django's is_staff), whatever their tenant."""

    message = (
        "This page is for Windtunnel operators (staff accounts) only; "
        "ask an operator if you need to see every tenant."
    )

    def has_permission(self, request, view) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and user.is_staff)
