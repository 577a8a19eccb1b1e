"""The rollback seed's five examples, each in a real git repository."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rollback_helpers import commit_all, git, porcelain, snapshot, write, write_log

from versions.workspace import (
    EXIT_BAD_INPUT,
    EXIT_DECLINED,
    EXIT_FAILED,
    EXIT_OK,
    ChangesLog,
    confirmation_prompt,
    rollback,
    run_rollback,
)

VOLATILE = ("timestamp", "duration_ms", "undo_log")


def stable(report: dict[str, Any]) -> dict[str, Any]:
    """The report without the keys that differ run to run (checked separately)."""
    return {k: v for k, v in report.items() if k not in VOLATILE}


def assert_volatile_keys(report: dict[str, Any]) -> None:
    assert report["timestamp"].endswith("Z") and len(report["timestamp"]) == 20
    assert isinstance(report["duration_ms"], int) and report["duration_ms"] >= 0


def test_example_1_full_rollback_restores_deletes_reverts_and_cleans(
    repo: Path, fake_pnpm: Path
) -> None:
    write(repo, "src/app.ts", "export const app = 1;\n")
    write(repo, "src/utils.ts", "export const utils = 1;\n")
    commit_all(repo, "app")
    before = snapshot(repo)
    # The phase: edits two files (backups first), adds one, builds, commits, leaves a plan.
    write(repo, ".rollback/src-app.ts.backup", "export const app = 1;\n")
    write(repo, ".rollback/src-utils.ts.backup", "export const utils = 1;\n")
    write(repo, "src/app.ts", "export const app = 2;\n")
    write(repo, "src/utils.ts", "export const utils = 2;\n")
    write(repo, "src/new-helper.ts", "export const helper = true;\n")
    write(repo, "dist/bundle.js", "built\n")
    write(repo, "CHANGELOG.md", "fixed the bug\n")
    git(repo, "add", "CHANGELOG.md")
    git(repo, "commit", "-q", "-m", "fix")
    sha = git(repo, "rev-parse", "--short=12", "HEAD")
    write(repo, ".bug-fixing-plan.json", "{}\n")
    log = write_log(
        repo,
        ".bug-changes.json",
        {
            "phase": "bug-fixing",
            "timestamp": "2025-10-18T14:30:00Z",
            "files_modified": [
                {"path": "src/app.ts", "backup": ".rollback/src-app.ts.backup"},
                {"path": "src/utils.ts", "backup": ".rollback/src-utils.ts.backup"},
            ],
            "files_created": ["src/new-helper.ts"],
            "commands_executed": ["pnpm install", "pnpm build"],
            "git_commits": [sha],
            "artifacts": [".bug-fixing-plan.json"],
        },
    )

    result = run_rollback(log, "bug-fixing", confirm=None)

    assert stable(result.report) == {
        "success": True,
        "phase": "bug-fixing",
        "actions_taken": [
            "Restored src/app.ts from .rollback/src-app.ts.backup",
            "Restored src/utils.ts from .rollback/src-utils.ts.backup",
            "Deleted src/new-helper.ts",
            "Re-ran pnpm install to restore dependencies",
            "Removed build artifacts (dist/)",
            f"Reverted git commit {sha}",
            "Removed artifact .bug-fixing-plan.json",
        ],
        "files_restored": 2,
        "files_deleted": 1,
        "commands_reverted": 2,
        "git_commits_reverted": 1,
        "artifacts_cleaned": 1,
        "errors": [],
        "warnings": [],
    }
    assert list(result.report)[:2] == ["success", "phase"]
    assert_volatile_keys(result.report)
    assert result.exit_code == EXIT_OK
    assert fake_pnpm.read_text() == "install --ignore-scripts --ignore-pnpmfile\n"
    # Everything succeeded, so the backups went too; the tree is the pre-phase tree again.
    assert not (repo / ".rollback").exists()
    assert snapshot(repo, ignore=(".bug-changes.json",)) == before
    assert Path(result.report["undo_log"]).is_file()
    assert porcelain(repo) == ""


def test_example_2_partial_rollback_warns_about_a_missing_backup(repo: Path) -> None:
    write(repo, "src/auth.ts", "auth v1\n")
    write(repo, "src/db.ts", "db v1\n")
    commit_all(repo, "auth")
    write(repo, ".rollback/src-auth.ts.backup", "auth v1\n")
    write(repo, "src/auth.ts", "auth v2\n")
    write(repo, "src/db.ts", "db v2\n")  # its backup was never written
    write(repo, "src/new-auth.ts", "new\n")
    log = write_log(
        repo,
        ".security-changes.json",
        {
            "phase": "security-remediation",
            "timestamp": "2025-10-18T14:30:00Z",
            "files_modified": [
                {"path": "src/auth.ts", "backup": ".rollback/src-auth.ts.backup"},
                {"path": "src/db.ts", "backup": ".rollback/src-db.ts.backup"},
            ],
            "files_created": ["src/new-auth.ts"],
            "commands_executed": [],
            "git_commits": [],
        },
    )

    result = run_rollback(log, "security-remediation", confirm=None)

    assert stable(result.report) == {
        "success": True,
        "phase": "security-remediation",
        "actions_taken": [
            "Restored src/auth.ts from .rollback/src-auth.ts.backup",
            "Deleted src/new-auth.ts",
        ],
        "files_restored": 1,
        "files_deleted": 1,
        "commands_reverted": 0,
        "git_commits_reverted": 0,
        "artifacts_cleaned": 0,
        "errors": [],
        "warnings": ["Backup not found: .rollback/src-db.ts.backup (file not restored)"],
    }
    assert result.exit_code == EXIT_OK
    assert (repo / "src/auth.ts").read_text() == "auth v1\n"
    assert (repo / "src/db.ts").read_text() == "db v2\n"
    assert not (repo / "src/new-auth.ts").exists()
    # Not everything succeeded: the seed keeps the backups.
    assert (repo / ".rollback/src-auth.ts.backup").is_file()


def test_example_3_declined_changes_nothing_and_returns_the_dry_run_result(repo: Path) -> None:
    write(repo, "src/old.ts", "old\n")
    commit_all(repo, "old")
    write(repo, ".rollback/src-old.ts.backup", "old\n")
    write(repo, "src/old.ts", "refactored\n")
    write(repo, "src/new.ts", "new\n")
    log = write_log(
        repo,
        ".refactor-changes.json",
        {
            "phase": "refactoring",
            "timestamp": "2025-10-18T14:30:00Z",
            "files_modified": [{"path": "src/old.ts", "backup": ".rollback/src-old.ts.backup"}],
            "files_created": ["src/new.ts"],
            "commands_executed": ["pnpm build"],
            "git_commits": [],
        },
    )
    before = snapshot(repo)
    prompts: list[str] = []

    def say_no(prompt: str) -> bool:
        prompts.append(prompt)
        return False

    result = run_rollback(log, "refactoring", confirm=say_no)

    assert stable(result.report) == {
        "success": False,
        "phase": "refactoring",
        "user_declined": True,
        "actions_taken": [],
        "files_restored": 0,
        "files_deleted": 0,
        "commands_reverted": 0,
        "git_commits_reverted": 0,
        "artifacts_cleaned": 0,
        "errors": [],
        "warnings": [],
    }
    assert list(result.report)[:3] == ["success", "phase", "user_declined"]
    assert result.report["duration_ms"] == 0 or result.report["duration_ms"] < 1000
    assert "undo_log" not in result.report
    assert result.exit_code == EXIT_DECLINED
    assert snapshot(repo) == before
    assert not (repo / ".rollback-undo").exists()
    assert prompts == [
        'Rollback changes from phase "refactoring"?\n'
        "\n"
        "Changes to revert:\n"
        "- Files modified: 1\n"
        "- Files created: 1\n"
        "- Commands executed: 1\n"
        "- Git commits: 0\n"
        "\n"
        "This action will:\n"
        "1. Restore 1 files from backups\n"
        "2. Delete 1 created files\n"
        "3. Revert 1 commands\n"
        "4. Revert 0 git commits\n"
        "\n"
        "Proceed with rollback? (yes/no)"
    ]


def test_example_4_missing_log_is_reported_with_the_seeds_error(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    before = snapshot(repo)

    result = run_rollback(".nonexistent-changes.json", "unknown", confirm=None)

    assert stable(result.report) == {
        "success": False,
        "phase": "unknown",
        "actions_taken": [],
        "files_restored": 0,
        "files_deleted": 0,
        "commands_reverted": 0,
        "git_commits_reverted": 0,
        "artifacts_cleaned": 0,
        "errors": ["Changes log not found at .nonexistent-changes.json"],
        "warnings": [],
    }
    assert_volatile_keys(result.report)
    assert result.exit_code == EXIT_BAD_INPUT
    assert snapshot(repo) == before


def test_example_5_conflicting_revert_is_aborted_and_the_rest_continues(repo: Path) -> None:
    write(repo, "src/app.ts", "const limit = 1;\n")
    write(repo, "notes.txt", "notes v1\n")
    commit_all(repo, "base")
    write(repo, "src/app.ts", "const limit = 2;\n")
    first = commit_all(repo, "phase: raise the limit")[:6]
    # Someone else edits the same line afterwards, so reverting the phase's commit conflicts.
    write(repo, "src/app.ts", "const limit = 3;\n")
    commit_all(repo, "hotfix: raise it again")
    write(repo, "notes.txt", "notes v2\n")
    second = commit_all(repo, "phase: notes")[:6]
    log = write_log(
        repo,
        ".bug-changes.json",
        {
            "phase": "bug-fixing",
            "timestamp": "2025-10-18T14:30:00Z",
            "files_modified": [],
            "files_created": [],
            "commands_executed": [],
            "git_commits": [first, second],
        },
    )

    report = rollback(log, "bug-fixing", confirm=None)

    assert stable(report) == {
        "success": True,
        "phase": "bug-fixing",
        "actions_taken": [f"Reverted git commit {second}"],
        "files_restored": 0,
        "files_deleted": 0,
        "commands_reverted": 0,
        "git_commits_reverted": 1,
        "artifacts_cleaned": 0,
        "errors": [f"Failed to revert commit {first}: Merge conflict in src/app.ts"],
        "warnings": [f"Manual resolution required for commit {first}"],
    }
    # The conflicted revert was aborted: no revert in progress, nothing staged or modified.
    assert porcelain(repo) == ""
    assert not (repo / ".git" / "REVERT_HEAD").exists()
    assert (repo / "src/app.ts").read_text() == "const limit = 3;\n"
    assert (repo / "notes.txt").read_text() == "notes v1\n"
    assert git(repo, "log", "-1", "--format=%s").startswith('Revert "phase: notes"')


def test_example_5_reports_failure_exit_code_while_success_stays_true(repo: Path) -> None:
    write(repo, "a.txt", "1\n")
    commit_all(repo, "base")
    write(repo, "a.txt", "2\n")
    sha = commit_all(repo, "phase")
    write(repo, "a.txt", "3\n")
    commit_all(repo, "later")
    log = write_log(
        repo,
        ".x-changes.json",
        {
            "phase": "x",
            "timestamp": "2025-10-18T14:30:00Z",
            "files_modified": [],
            "files_created": [],
            "commands_executed": [],
            "git_commits": [sha],
        },
    )

    result = run_rollback(log, "x", confirm=None)

    # Nothing could be done at all: not even the seed's partial success.
    assert result.report["success"] is False
    assert result.exit_code == EXIT_FAILED
    assert porcelain(repo) == ""


def test_confirmation_prompt_counts_come_from_the_log() -> None:
    log = ChangesLog.new("bug-fixing")
    log.files_created = ["a", "b"]
    log.git_commits = ["abc123"]

    prompt = confirmation_prompt(log)

    assert prompt.startswith('Rollback changes from phase "bug-fixing"?\n')
    assert "- Files created: 2\n" in prompt and "2. Delete 2 created files\n" in prompt
    assert "4. Revert 1 git commits\n" in prompt
    assert prompt.endswith("Proceed with rollback? (yes/no)")


def test_saying_yes_rolls_back(repo: Path) -> None:
    write(repo, "new.txt", "x\n")
    log = write_log(
        repo,
        ".p-changes.json",
        {
            "phase": "p",
            "timestamp": "2025-10-18T14:30:00Z",
            "files_modified": [],
            "files_created": ["new.txt"],
            "commands_executed": [],
            "git_commits": [],
        },
    )

    report = rollback(log, "p", confirm=lambda prompt: True)

    assert report["success"] is True and report["actions_taken"] == ["Deleted new.txt"]
    assert not (repo / "new.txt").exists()
