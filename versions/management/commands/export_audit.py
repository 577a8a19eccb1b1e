"""``export_audit [--app slug] [--since ISO-date]``: the audit trail as JSON lines, oldest
first, each event with its ``prev_hash`` and ``hash``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from versions import selectors
from versions.errors import VersionsError

BAD_SINCE = (
    "--since takes an ISO date or date and time (2026-12-02 or 2026-12-02T13:00Z), not “{value}”."
)


class Command(BaseCommand):
    help = "Write the audit trail as JSON lines (one event a line, oldest first) to stdout."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--app", metavar="SLUG", help="Only this app's events.")
        parser.add_argument(
            "--since", metavar="ISO-DATE", help="Only events from this moment on (UTC if no zone)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        since = None
        if options["since"]:
            try:
                since = datetime.fromisoformat(options["since"])
            except ValueError:
                raise CommandError(BAD_SINCE.format(value=options["since"]))
            if since.tzinfo is None:
                since = since.replace(tzinfo=UTC)
        try:
            app = selectors.app_of(options["app"]) if options["app"] else None
        except VersionsError as exc:
            raise CommandError(exc.message)
        for document in selectors.audit_export(app, since):
            self.stdout.write(json.dumps(document, ensure_ascii=False, sort_keys=True))
