from django.apps import AppConfig


class AdministrationConfig(AppConfig):
    """Read-only operator views (tenants, backends, images) and the web UI's entry page."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "administration"
