"""``list_agent_tokens [--user NAME] [--app SLUG] [--active]``: every agent token, one a line."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from versions.services import (
    list_agent_tokens,
)

COLUMNS = ("ID", "PREFIX", "USER", "APPS", "STATUS", "CREATED", "EXPIRES", "LAST USED", "LABEL")
NO_TOKENS = "No agent tokens match."


def _when(moment: datetime | None, empty: str) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M") if moment else empty


class Command(BaseCommand):
    help = (
        "List agent tokens (never the tokens themselves): id, prefix, user, apps, status "
        "(active, expired, revoked), when made, when they expire and when last used (UTC)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", help="Only this user's tokens.")
        parser.add_argument("--app", metavar="SLUG", help="Only tokens that may act on this app.")
        parser.add_argument(
            "--active", action="store_true", help="Only tokens that authenticate today."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        rows = list_agent_tokens(
            username=options["user"], app_slug=options["app"], active_only=options["active"]
        )
        now = timezone.now()
        table = [
            (
                str(row.pk),
                f"{row.prefix}…",
                row.user.get_username() + ("" if row.user.is_active else " (inactive)"),
                ",".join(sorted(app.slug for app in row.apps.all())),
                row.status(now),
                _when(row.created_on, "-"),
                _when(row.expires_on, "never"),
                _when(row.last_used_on, "never"),
                row.label,
            )
            for row in rows
        ]
        if not table:
            self.stdout.write(NO_TOKENS)
            return
        widths = [max(len(line[i]) for line in [COLUMNS, *table]) for i in range(len(COLUMNS))]
        for line in [COLUMNS, *table]:
            cells = (cell.ljust(w) for cell, w in zip(line, widths, strict=True))
            self.stdout.write("  ".join(cells).rstrip())
