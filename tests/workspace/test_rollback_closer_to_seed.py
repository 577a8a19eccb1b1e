"""Workspace rollback, closer to the second seed and kinder
(docs/architecture.md#workspace-rollback): step 8's plan file goes even when unlisted, the exit
codes are stated as they are, the prompt is a plain question, `track_changes` gitignores the
backups, and an odd `timestamp` is only a warning."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command, load_command_class
from rollback_helpers import commit_all, git, phase_log, snapshot, write

from versions.workspace import EXIT_DECLINED, EXIT_OK, ChangesTracker, run_rollback

PLAN = ".bug-fixing-plan.json"


# -- step 8: .{phase}-plan.json ------------------------------------------------------------


def test_the_phase_plan_file_is_removed_though_the_log_does_not_list_it(repo: Path) -> None:
    write(repo, PLAN, '{"steps": []}\n')
    log = phase_log(repo)

    result = run_rollback(log, "bug-fixing", confirm=None)

    assert not (repo / PLAN).exists()
    assert result.report["actions_taken"] == [f"Removed artifact {PLAN}"]
    assert result.report["artifacts_cleaned"] == 1
    assert result.report["errors"] == [] and result.exit_code == EXIT_OK


def test_a_listed_plan_file_is_removed_once_and_no_plan_file_is_no_warning(repo: Path) -> None:
    write(repo, PLAN, "{}\n")
    log = phase_log(repo, artifacts=[PLAN])
    once = run_rollback(log, "bug-fixing", confirm=None)
    assert once.report["actions_taken"] == [f"Removed artifact {PLAN}"]

    again = run_rollback(phase_log(repo), "bug-fixing", confirm=None)  # nothing there now
    assert again.report["actions_taken"] == [] and again.report["warnings"] == []


def test_a_plan_file_the_phase_modified_is_restored_not_removed(repo: Path) -> None:
    write(repo, PLAN, "before\n")
    commit_all(repo, "plan")
    tracker = ChangesTracker(repo / ".bug-changes.json", "bug-fixing")
    tracker.record_modify(repo / PLAN)
    write(repo, PLAN, "during\n")

    result = run_rollback(repo / ".bug-changes.json", "bug-fixing", confirm=None)

    assert (repo / PLAN).read_text() == "before\n"
    assert f"Removed artifact {PLAN}" not in result.report["actions_taken"]


def test_the_undo_of_a_rollback_brings_the_plan_file_back(repo: Path) -> None:
    write(repo, PLAN, "plan\n")
    first = run_rollback(phase_log(repo), "bug-fixing", confirm=None)
    assert not (repo / PLAN).exists()

    undo = run_rollback(first.report["undo_log"], "bug-fixing", confirm=None)

    assert undo.report["errors"] == []
    assert (repo / PLAN).read_text() == "plan\n"


@pytest.mark.parametrize("phase", ["a/b", "..", "x\\y"])
def test_a_phase_that_cannot_name_a_plan_file_is_no_refusal(repo: Path, phase: str) -> None:
    log = phase_log(repo, phase=phase)
    result = run_rollback(log, phase, confirm=None)
    assert result.exit_code == EXIT_OK and result.report["errors"] == []


# -- the timestamp ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("timestamp", "shown"),
    [
        ("yesterday", '"yesterday"'),
        ("18/10/2025 14:30", '"18/10/2025 14:30"'),
        (None, "null"),
        (1729261800, "1729261800"),
        ("", '""'),
    ],
)
def test_a_malformed_timestamp_is_a_warning_and_the_rollback_runs(
    repo: Path, timestamp: object, shown: str
) -> None:
    write(repo, "src/new.ts", "new\n")
    log = phase_log(repo, timestamp=timestamp, files_created=["src/new.ts"])

    result = run_rollback(log, "bug-fixing", confirm=None)

    assert result.exit_code == EXIT_OK
    assert result.report["success"] is True and result.report["errors"] == []
    assert result.report["actions_taken"] == ["Deleted src/new.ts"]
    assert result.report["warnings"] == [
        f"Changes log timestamp is not ISO-8601: {shown} (ignored)"
    ]
    assert not (repo / "src/new.ts").exists()


def test_a_missing_timestamp_is_still_the_seeds_refusal(repo: Path) -> None:
    log = phase_log(repo)
    data = json.loads(log.read_text())
    del data["timestamp"]
    log.write_text(json.dumps(data))
    result = run_rollback(log, "bug-fixing", confirm=None)
    assert result.report["errors"] == ["Changes log missing required field: timestamp"]


# -- .gitignore ---------------------------------------------------------------------------


@pytest.fixture
def bare_repo(tmp_path: Path) -> Path:
    """A git repository that ignores nothing (no info/exclude entries of ours)."""
    root = tmp_path / "plain"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "T")
    git(root, "config", "commit.gpgsign", "false")
    write(root, "src/app.ts", "v1\n")
    commit_all(root, "initial")
    return root.resolve()


def test_track_changes_gitignores_the_backups_so_git_add_all_never_commits_them(
    bare_repo: Path,
) -> None:
    out = io.StringIO()
    base = ["--log", str(bare_repo / ".bug-changes.json"), "--phase", "bug-fixing"]
    call_command("track_changes", *base, "modify", str(bare_repo / "src/app.ts"), stdout=out)
    write(bare_repo, "src/app.ts", "v2\n")

    assert (bare_repo / ".gitignore").read_text().splitlines()[-2:] == [
        ".rollback/",
        ".rollback-undo/",
    ]
    git(bare_repo, "add", "-A")
    staged = git(bare_repo, "diff", "--cached", "--name-only").splitlines()
    assert not [name for name in staged if name.startswith(".rollback")]
    assert (bare_repo / ".rollback/src-app.ts.backup").read_text() == "v1\n"


def test_an_existing_gitignore_keeps_its_lines_and_is_changed_once(bare_repo: Path) -> None:
    write(bare_repo, ".gitignore", "node_modules/\ndist")  # no final newline
    ChangesTracker(bare_repo / ".bug-changes.json", "bug-fixing")
    ChangesTracker(bare_repo / ".bug-changes.json", "bug-fixing")

    lines = (bare_repo / ".gitignore").read_text().splitlines()
    assert lines[:2] == ["node_modules/", "dist"]
    assert lines.count(".rollback/") == 1 and lines.count(".rollback-undo/") == 1


def test_a_gitignore_that_already_ignores_them_is_left_alone(bare_repo: Path) -> None:
    write(bare_repo, ".gitignore", "/.rollback\n.rollback-undo/\n")
    ChangesTracker(bare_repo / ".bug-changes.json", "bug-fixing")
    assert (bare_repo / ".gitignore").read_text() == "/.rollback\n.rollback-undo/\n"


def test_a_gitignore_leading_outside_is_never_written_through(
    bare_repo: Path, outside: Path
) -> None:
    os.symlink(outside / "victim.txt", bare_repo / ".gitignore")
    before = snapshot(outside)
    with pytest.raises(OSError):
        ChangesTracker(bare_repo / ".bug-changes.json", "bug-fixing")
    assert snapshot(outside) == before


# -- the command: prompt and exit codes ---------------------------------------------------


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_confirmation_prompt_is_plain_text_never_styled_as_an_error(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = phase_log(repo)
    monkeypatch.setattr(sys, "stdin", FakeTerminal("no\n"))
    out, err = io.StringIO(), FakeTerminal()  # stderr is a colour terminal

    with pytest.raises(CommandError) as declined:
        call_command(
            "rollback_changes",
            str(log),
            "--phase",
            "bug-fixing",
            stdout=out,
            stderr=err,
            force_color=True,
        )

    assert declined.value.returncode == EXIT_DECLINED
    assert err.getvalue().startswith('Rollback changes from phase "bug-fixing"?\n')
    assert "Proceed with rollback? (yes/no) " in err.getvalue()
    assert "\x1b[" not in err.getvalue()


def test_the_command_states_its_exit_codes_as_they_are() -> None:
    help_text = load_command_class("versions", "rollback_changes").help
    assert "0 = done with no errors" in help_text
    assert "1 = finished with errors (the report's success may still be true" in help_text
    assert "2 = refused" in help_text and "3 = declined" in help_text


def test_the_readme_states_the_exit_codes_as_they_are() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "| 0 | done, with no errors" in readme
    assert "| 1 | finished with errors" in readme and "`success` may still be `true`" in readme
    assert "| 2 | refused" in readme and "| 3 | declined" in readme
