from django.apps import AppConfig


class VersionsConfig(AppConfig):
    """Restore points, change sets and restores for agent-written app artifacts."""

    name = "versions"
    verbose_name = "Versions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A setting read at call time is still checked as the server starts: a bad value
        # stops it with a message rather than failing the first write that prunes.
        from versions import conf

        conf.sweep_batch()
        # Sign-in, sign-out, failed sign-ins and lock-outs go to the audit trail.
        from versions import signals  # noqa: F401
