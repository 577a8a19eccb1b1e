"""``dump_app <slug> <file>``: write one app's whole history to a portable archive
(docs/operations.md#dump-load)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from versions import services
from versions.errors import VersionsError


class Command(BaseCommand):
    help = (
        "Write an app's whole history (artifacts, restore points, change sets, the blobs they "
        "reference as stored, release marks, deployments, memberships, audit events) to one "
        "archive file, for load_app on another Versions."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="The app to write out.")
        parser.add_argument("file", help="The archive to write (replaced if it exists).")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = services.dump_app(options["slug"], options["file"])
        except (VersionsError, OSError) as exc:
            raise CommandError(getattr(exc, "message", None) or str(exc))
        rows = ", ".join(f"{count} {kind}" for kind, count in report.rows.items())
        self.stdout.write(f"Wrote {report.slug} to {report.path} ({rows}); sha256 {report.sha256}.")
