"""``mcp_server --app <slug> --token <token>``: the MCP server over stdio (docs/api.md#mcp).

stdout carries the MCP protocol and nothing else; every log line goes to stderr.
The token may also come from the environment variable ``VERSIONS_MCP_TOKEN``, which keeps it
out of process listings and shell history.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from versions import services
from versions.errors import VersionsError

TOKEN_ENV = "VERSIONS_MCP_TOKEN"
NO_DATABASE = (
    "There is no database at {name}: run “python manage.py migrate” (or set DATABASE_URL) first."
)
DATABASE_UNUSABLE = (
    "The database cannot be used ({error}): check DATABASE_URL and run “python manage.py migrate”."
)


def _check_database() -> None:
    """One line in words, and nothing created, when the database is missing or not migrated
    (opening a missing SQLite file would create an empty one)."""
    db = settings.DATABASES["default"]
    name = str(db.get("NAME") or "")
    sqlite_file = db["ENGINE"].endswith("sqlite3") and name not in ("", ":memory:")
    if sqlite_file and not name.startswith("file:") and not os.path.exists(name):
        raise CommandError(NO_DATABASE.format(name=name))


class Command(BaseCommand):
    help = (
        "Serve an app's artifacts to MCP clients over stdio. Every write is captured as a "
        "restore point with tool “mcp:<client name>”."
    )
    # System checks print to stdout, which belongs to the protocol.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--app", required=True, metavar="SLUG", help="The app to serve.")
        parser.add_argument(
            "--token",
            default=None,
            help=f"An agent token (create_agent_token); default: ${TOKEN_ENV}.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # Anything printed by accident must not corrupt the protocol stream.
        logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
        # Versions' own records have their handler (stderr too): not printed a second time.
        logging.getLogger("versions").propagate = False
        token = options["token"] or os.environ.get(TOKEN_ENV, "")
        slug = options["app"]
        _check_database()
        try:
            if services.verify_token(token) is None:
                raise CommandError(f"The token is not valid (pass --token or set ${TOKEN_ENV}).")
            actor = services.authenticate_token(token)
            services.app_for(slug, actor=actor)
        except VersionsError as exc:
            raise CommandError(exc.message)
        except DatabaseError as exc:
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else "no answer"
            raise CommandError(DATABASE_UNUSABLE.format(error=first_line[:200]))

        from versions.mcp import build_server

        server = build_server(slug, token)
        logging.getLogger("versions.mcp").info(
            "Versions MCP server for app “%s” as %s, on stdio.", slug, actor.name
        )
        server.run("stdio")
