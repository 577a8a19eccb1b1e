"""``create_agent_token <username> --app <slug> [--app <slug> …] [--can-promote]``: a bearer
token, shown once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from versions.errors import VersionsError
from versions.services import (
    create_agent_token,
)
from versions.terms import (
    DEFAULT_EXPIRY_DAYS,
)


class Command(BaseCommand):
    help = (
        "Create an agent token for the agent API and the MCP server, scoped to the given apps. "
        "The token is printed once, alone on the last line; only its hash is stored."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", help="The user the token acts as; their permissions apply.")
        parser.add_argument(
            "--app",
            action="append",
            dest="apps",
            default=[],
            metavar="SLUG",
            help="An app the token may act on (repeat for several).",
        )
        parser.add_argument("--label", default="", help="A note to recognise the token by.")
        parser.add_argument(
            "--expires-in-days",
            type=int,
            default=DEFAULT_EXPIRY_DAYS,
            metavar="N",
            help=f"Days until the token stops working (1 to 3650; default {DEFAULT_EXPIRY_DAYS}).",
        )
        parser.add_argument(
            "--can-promote",
            action="store_true",
            help="The token may promote to production and roll it back (its user needs the "
            "promote_deployment permission too). Without it, a token can never promote.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["apps"]:
            raise CommandError("Give at least one app: --app <slug>.")
        try:
            token, row = create_agent_token(
                options["username"],
                options["apps"],
                label=options["label"],
                expires_in_days=options["expires_in_days"],
                can_promote=options["can_promote"],
            )
        except VersionsError as exc:
            raise CommandError(exc.message)
        apps = ", ".join(sorted(row.apps.values_list("slug", flat=True)))
        assert row.expires_on is not None
        expires = row.expires_on.strftime("%Y-%m-%d %H:%M UTC")
        promotes = " It can promote to production." if row.can_promote else ""
        self.stdout.write(
            f"Created token {row.pk} for {row.user.get_username()} on {apps}, expiring "
            f"{expires}.{promotes} It is shown only this once; store it now:"
        )
        self.stdout.write(token)
