"""``revoke_agent_token <id or prefix>``: the token authenticates nothing from now on."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from versions.errors import VersionsError
from versions.services import (
    revoke_app_token,
)


class Command(BaseCommand):
    help = "Revoke an agent token, named by its id or its prefix (see list_agent_tokens)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("token", help="The token's id, or the start of its prefix (vt_…).")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            _row, words = revoke_app_token(options["token"])
        except VersionsError as exc:
            raise CommandError(exc.message)
        self.stdout.write(words)
