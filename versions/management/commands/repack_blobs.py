"""``repack_blobs [--app <slug>]``: store the history of an app's artifacts as zstd deltas."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from versions import services
from versions.models import App

NO_SUCH_APP = "There is no app “{slug}”."


class Command(BaseCommand):
    help = (
        "Re-pack stored sources as deltas against a full copy of an earlier version (at most "
        "15 deltas per full copy), in place: same hashes, same bytes read back. Commits every "
        "batch of artifacts, so it can be interrupted and run again; blobs already packed are "
        "skipped."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--app", metavar="SLUG", help="Only this app (default: every app).")
        parser.add_argument(
            "--batch", type=int, default=100, help="Artifacts per transaction (default 100)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        app_id = None
        if options["app"]:
            app = App.objects.filter(slug=options["app"]).first()
            if app is None:
                raise CommandError(NO_SUCH_APP.format(slug=options["app"]))
            app_id = app.pk
        result = services.repack_blobs(app_id=app_id, batch=max(1, options["batch"]))
        self.stdout.write(
            f"Re-packed {result.repacked} blobs of {result.artifacts} artifacts: "
            f"{result.bytes_before} bytes stored before, {result.bytes_after} after."
        )
