"""`manage.py rollback_changes`: roll back a failed workflow phase from its changes log."""

from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from versions.workspace import EXIT_BAD_INPUT, EXIT_DECLINED, EXIT_OK, run_rollback

NO_TERMINAL = "No terminal to confirm on and no --yes: rollback declined."
EXIT_MESSAGES = {
    1: "Rollback finished with errors (see the report's errors; what could be done was done).",
    EXIT_BAD_INPUT: "Rollback refused: bad input, nothing was done (see the report's errors).",
    EXIT_DECLINED: "Rollback declined: nothing was changed.",
}


class Command(BaseCommand):
    help = (
        "Roll back a workflow phase from its changes log: restore backups, delete created files, "
        "revert commands and commits. Exit codes: 0 = done with no errors; 1 = finished with "
        "errors (the report's success may still be true: a partial rollback); 2 = refused (bad "
        "input, nothing done); 3 = declined (nothing done)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("changes_log", help="Path to the changes log, e.g. .bug-changes.json")
        parser.add_argument("--phase", required=True, help="The phase the log must be for")
        parser.add_argument("--yes", action="store_true", help="Roll back without confirmation")
        parser.add_argument(
            "--dry-run", action="store_true", help="Validate and predict; change nothing"
        )
        parser.add_argument(
            "--workspace", help="Workspace root (default: git top level of the log's folder)"
        )
        parser.add_argument("--report", help="Also write the report JSON to this file")

    def handle(self, *args: Any, **options: Any) -> None:
        confirm = None if options["yes"] or options["dry_run"] else self._ask
        result = run_rollback(
            options["changes_log"],
            options["phase"],
            confirm=confirm,
            workspace=options["workspace"],
            dry_run=options["dry_run"],
            by=_os_user(),
        )
        payload = json.dumps(result.report, indent=2, ensure_ascii=False)
        self.stdout.write(payload)
        if options["report"]:
            Path(options["report"]).write_text(payload + "\n", encoding="utf-8")
        if result.exit_code != EXIT_OK:
            raise CommandError(EXIT_MESSAGES[result.exit_code], returncode=result.exit_code)

    def _ask(self, prompt: str) -> bool:
        # The prompt goes to the terminal on stderr so stdout stays pure JSON for whoever pipes
        # it — as plain text: a question, not an error (Django styles stderr red by default).
        if not sys.stdin or not sys.stdin.isatty():
            self.stderr.write(NO_TERMINAL)
            return False
        self.stderr.write(prompt + " ", style_func=_plain, ending="")
        self.stderr.flush()
        answer = sys.stdin.readline()
        return answer.strip().lower() in {"yes", "y"}


def _plain(text: str) -> str:
    return text


def _os_user() -> str:
    """Who runs the command, for the undo log's metadata ("" when it cannot be told)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""
