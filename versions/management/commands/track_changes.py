"""`manage.py track_changes`: the worker side of rollback, recording one change per call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from versions.workspace import ChangesLogError, ChangesTracker, UnsafePathError


class Command(BaseCommand):
    help = (
        "Record a workflow phase's changes in a changes log: "
        "init | modify PATH | create PATH | command CMD | commit SHA | artifact PATH | "
        "plan-file PATH. Run `modify` before changing the file: it keeps the backup. "
        "With --workspace, a relative --log is inside the workspace; PATH arguments are "
        "always taken from the current folder. Adds .rollback/ and .rollback-undo/ to the "
        "workspace's .gitignore."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--log",
            required=True,
            help=(
                "The changes log, e.g. .bug-changes.json. A relative path is taken inside "
                "--workspace when it is given, else from the current folder"
            ),
        )
        parser.add_argument("--phase", required=True, help="The workflow phase, e.g. bug-fixing")
        parser.add_argument(
            "--workspace",
            help="Workspace root (default: the git top level of the log's folder, or that folder)",
        )
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("init", help="Create the log if it does not exist")
        for name, what in (
            ("modify", "PATH to back up before you change it"),
            ("create", "PATH you created"),
            ("artifact", "temporary PATH to remove on rollback"),
            ("plan-file", "plan file PATH to remove on rollback"),
        ):
            actions.add_parser(name, help=what).add_argument("path")
        actions.add_parser("command", help="a command you ran").add_argument("cmd")
        actions.add_parser("commit", help="a commit you made").add_argument("sha")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            tracker = ChangesTracker(
                log_path(options["log"], options["workspace"]),
                options["phase"],
                workspace=options["workspace"],
            )
            action = options["action"]
            if action == "modify":
                backup = tracker.record_modify(options["path"])
                self.stdout.write(backup or "(created in this phase: no backup needed)")
            elif action == "create":
                tracker.record_create(options["path"])
            elif action == "artifact":
                tracker.add_artifact(options["path"])
            elif action == "plan-file":
                tracker.add_plan_file(options["path"])
            elif action == "command":
                tracker.record_command(options["cmd"])
            elif action == "commit":
                tracker.record_commit(options["sha"])
        except (ChangesLogError, UnsafePathError, ValueError, OSError) as exc:
            raise CommandError(str(exc), returncode=2)
        if action == "init":
            self.stdout.write(str(tracker.log_path))


def log_path(log: str, workspace: str | None) -> Path:
    """Where `--log` points: a relative path is inside `--workspace` when one is given, so a
    worker running from another folder never leaves a stray log there."""
    path = Path(log).expanduser()
    if workspace and not path.is_absolute():
        return Path(workspace).expanduser() / path
    return path
