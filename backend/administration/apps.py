from django.apps import AppConfig


class AdministrationConfig(AppConfig):
    """What operators see and do: tenants and usage, backends (create, check), and the web
    UI's entry page."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "administration"
