"""`summary()`: what a rollback would do, for the panel, without doing any of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from rollback_helpers import snapshot, write, write_log

from versions.workspace import RollbackInputError, summary


def test_summary_describes_the_log_and_the_disk_without_changing_anything(repo: Path) -> None:
    write(repo, ".rollback/src-app.ts.backup", "old\n")
    write(repo, "src/app.ts", "new\n")
    log = write_log(
        repo,
        ".bug-changes.json",
        {
            "phase": "bug-fixing",
            "timestamp": "2025-10-18T14:30:00Z",
            "files_modified": [
                {"path": "src/app.ts", "backup": ".rollback/src-app.ts.backup"},
                {"path": "src/db.ts", "backup": ".rollback/src-db.ts.backup"},
            ],
            "files_created": ["src/gone.ts"],
            "commands_executed": ["pnpm install", "deploy.sh"],
            "git_commits": ["abc123"],
        },
    )
    before = snapshot(repo)

    info = summary(log, phase="bug-fixing")

    assert snapshot(repo) == before
    assert info["workspace"] == str(repo)
    assert info["prompt"].startswith('Rollback changes from phase "bug-fixing"?')
    app, db = info["files_modified"]
    assert app["target"] == str(repo / "src/app.ts") and app["backup_exists"] is True
    assert db["backup_exists"] is False and db["exists"] is False
    assert info["files_created"] == [
        {"path": "src/gone.ts", "target": str(repo / "src/gone.ts"), "exists": False}
    ]
    assert [c["revert"] for c in info["commands_executed"]] == ["pnpm install", None]
    assert info["warnings"] == [
        "Backup not found: .rollback/src-db.ts.backup (file not restored)",
        "File not found (already deleted?): src/gone.ts",
        "Cannot auto-revert: deploy.sh (manual intervention required)",
    ]


def test_summary_raises_with_every_reason_for_a_refused_log(repo: Path) -> None:
    log = write_log(
        repo,
        ".bug-changes.json",
        {
            "phase": "bug-fixing",
            "timestamp": "2025-10-18T14:30:00Z",
            "files_modified": [],
            "files_created": ["../x", ".git/config"],
            "commands_executed": [],
            "git_commits": [],
        },
    )

    with pytest.raises(RollbackInputError) as refused:
        summary(log)

    assert len(refused.value.errors) == 2
