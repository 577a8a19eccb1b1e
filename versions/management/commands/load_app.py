"""``load_app <file>``: put the app of a ``dump_app`` archive into this Versions, ids and bytes
as they were, in one transaction (docs/operations.md#dump-load)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from versions import services
from versions.errors import VersionsError


class Command(BaseCommand):
    help = (
        "Load an app written by dump_app, ids kept, in one transaction. Refused, with nothing "
        "written, when its slug or one of its ids exists here, or the archive is damaged or of "
        "an unknown format version."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="The archive dump_app wrote.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = services.load_app(options["file"])
        except VersionsError as exc:
            raise CommandError(exc.message)
        rows = ", ".join(f"{count} {kind}" for kind, count in report.rows.items())
        self.stdout.write(f"Loaded {report.slug} from {report.path} ({rows}).")
