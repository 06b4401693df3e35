from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "tenancy"

    def ready(self) -> None:
        from tenancy import schema  # noqa: F401  (registers the OpenAPI auth extension)
