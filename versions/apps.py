from django.apps import AppConfig


class VersionsConfig(AppConfig):
    """Restore points, change sets and restores for agent-written app artifacts."""

    name = "versions"
    verbose_name = "Versions"
    default_auto_field = "django.db.models.BigAutoField"
