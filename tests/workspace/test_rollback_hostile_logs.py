"""Hostile changes logs: refused or warned before anything happens, nothing outside touched."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from rollback_helpers import git, phase_log, porcelain, snapshot, write

from versions.workspace import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    UnsafePathError,
    resolve_in_workspace,
    run_rollback,
    workspace_root,
)


def hostile_log(root: Path, **fields: Any) -> Path:
    return phase_log(root, **fields)


@pytest.fixture
def innocent(repo: Path) -> Path:
    """A legitimate entry in every hostile log: refusing means it is not deleted either."""
    write(repo, "src/new.ts", "created by the phase\n")
    return repo


def refuse(root: Path, outside: Path, log: Path, *fragments: str) -> dict[str, Any]:
    before_inside, before_outside = snapshot(root), snapshot(outside)

    result = run_rollback(log, "bug-fixing", confirm=None)

    assert result.exit_code == EXIT_BAD_INPUT, result.report
    assert result.report["success"] is False
    assert result.report["actions_taken"] == []
    for fragment in fragments:
        assert any(fragment in error for error in result.report["errors"]), result.report
    assert snapshot(root) == before_inside
    assert snapshot(outside) == before_outside
    undo = root / ".rollback-undo"
    assert undo.is_symlink() or not undo.exists()
    return result.report


def test_dotdot_paths_are_refused(innocent: Path, outside: Path) -> None:
    log = hostile_log(innocent, files_created=["src/new.ts", "../outside/victim.txt"])

    report = refuse(
        innocent,
        outside,
        log,
        "Refused path \"../outside/victim.txt\" in files_created[1]: '..' escapes the workspace",
    )
    assert len(report["errors"]) == 1


def test_deep_dotdot_in_a_backup_is_refused(innocent: Path, outside: Path) -> None:
    log = hostile_log(
        innocent,
        files_modified=[{"path": "README.md", "backup": "../../outside/secret.txt"}],
        files_created=["src/new.ts"],
    )

    refuse(innocent, outside, log, "files_modified[0].backup: '..' escapes the workspace")
    assert (innocent / "README.md").read_text() == "# Demo\n"


def test_absolute_paths_outside_are_refused(innocent: Path, outside: Path) -> None:
    victim = outside / "victim.txt"
    log = hostile_log(
        innocent,
        files_modified=[{"path": str(victim), "backup": "README.md"}],
        files_created=["src/new.ts"],
        artifacts=[str(outside)],
    )

    refuse(
        innocent,
        outside,
        log,
        f'Refused path "{victim}" in files_modified[0].path: absolute path outside the workspace',
        f'Refused path "{outside}" in artifacts[0]',
    )


def test_absolute_paths_inside_the_workspace_are_fine(innocent: Path) -> None:
    log = hostile_log(innocent, files_created=[str(innocent / "src/new.ts")])

    result = run_rollback(log, "bug-fixing", confirm=None)

    assert result.exit_code == EXIT_OK
    assert not (innocent / "src/new.ts").exists()


def test_a_symlinked_folder_pointing_outside_is_refused(innocent: Path, outside: Path) -> None:
    (innocent / "linked").symlink_to(outside, target_is_directory=True)
    log = hostile_log(
        innocent,
        files_modified=[{"path": "linked/victim.txt", "backup": "README.md"}],
        files_created=["src/new.ts", "linked/secret.txt"],
    )

    refuse(
        innocent,
        outside,
        log,
        'Refused path "linked/victim.txt" in files_modified[0].path: '
        "a symlink leads outside the workspace",
        'Refused path "linked/secret.txt" in files_created[1]',
    )


def test_a_backup_read_through_a_symlink_to_outside_is_refused(
    innocent: Path, outside: Path
) -> None:
    (innocent / ".rollback").mkdir()
    (innocent / ".rollback" / "README.md.backup").symlink_to(outside / "secret.txt")
    log = hostile_log(
        innocent, files_modified=[{"path": "README.md", "backup": ".rollback/README.md.backup"}]
    )

    refuse(innocent, outside, log, "files_modified[0].backup: a symlink leads outside")
    assert (innocent / "README.md").read_text() == "# Demo\n"


def test_a_file_symlink_pointing_outside_is_never_written_through(
    innocent: Path, outside: Path
) -> None:
    (innocent / "config.ts").symlink_to(outside / "victim.txt")
    write(innocent, ".rollback/config.ts.backup", "pwned\n")
    log = hostile_log(
        innocent, files_modified=[{"path": "config.ts", "backup": ".rollback/config.ts.backup"}]
    )

    refuse(innocent, outside, log, "a symlink leads outside the workspace")


@pytest.mark.parametrize(
    "path", [".git/hooks/post-checkout", ".git/config", "src/../.git/HEAD", ".GIT/config"]
)
def test_anything_inside_git_is_refused(innocent: Path, outside: Path, path: str) -> None:
    write(innocent, ".rollback/hook.backup", "#!/bin/sh\ntouch /tmp/pwned\n")
    log = hostile_log(
        innocent,
        files_modified=[{"path": path, "backup": ".rollback/hook.backup"}],
        files_created=["src/new.ts", path],
    )
    hooks_before = sorted(os.listdir(innocent / ".git" / "hooks"))
    config_before = (innocent / ".git" / "config").read_bytes()

    refuse(innocent, outside, log, "paths inside .git are never touched")
    assert sorted(os.listdir(innocent / ".git" / "hooks")) == hooks_before
    assert (innocent / ".git" / "config").read_bytes() == config_before
    assert (innocent / ".git" / "HEAD").is_file()


def test_a_backup_inside_git_is_refused(innocent: Path, outside: Path) -> None:
    log = hostile_log(innocent, files_modified=[{"path": "stolen", "backup": ".git/config"}])

    refuse(innocent, outside, log, "files_modified[0].backup: paths inside .git")
    assert not (innocent / "stolen").exists()


@pytest.mark.parametrize("path", [".", "src/..", "./"])
def test_the_workspace_root_itself_is_never_a_target(
    innocent: Path, outside: Path, path: str
) -> None:
    log = hostile_log(innocent, files_created=[path])

    refuse(innocent, outside, log, "names the workspace root itself")


def test_the_counter_backups_are_never_a_target(innocent: Path, outside: Path) -> None:
    write(innocent, ".rollback-undo/20250101T000000Z/changes.json", "{}")
    log = hostile_log(innocent, files_created=[".rollback-undo"])
    before = snapshot(innocent)

    result = run_rollback(log, "bug-fixing", confirm=None)

    assert result.exit_code == EXIT_BAD_INPUT
    assert ".rollback-undo/ holds the counter-backups" in result.report["errors"][0]
    assert snapshot(innocent) == before
    assert (innocent / ".rollback-undo/20250101T000000Z/changes.json").is_file()


def test_a_symlinked_counter_backup_folder_is_refused(innocent: Path, outside: Path) -> None:
    (innocent / ".rollback-undo").symlink_to(outside, target_is_directory=True)
    log = hostile_log(innocent, files_created=["src/new.ts"])

    refuse(innocent, outside, log, ".rollback-undo/ is not a plain folder")


@pytest.mark.parametrize(
    "template",
    [
        "touch {marker}",
        "pnpm install; touch {marker}",
        "pnpm install && touch {marker}",
        "pnpm build $(touch {marker})",
        "sh -c 'touch {marker}'",
        "`touch {marker}`",
    ],
)
def test_commands_from_the_log_are_never_run(repo: Path, tmp_path: Path, template: str) -> None:
    marker = tmp_path / "marker"
    command = template.format(marker=marker)
    log = hostile_log(repo, commands_executed=[command])

    result = run_rollback(log, "bug-fixing", confirm=None)

    assert result.report["warnings"] == [
        f"Cannot auto-revert: {command} (manual intervention required)"
    ]
    assert result.report["commands_reverted"] == 0
    assert result.exit_code == EXIT_OK
    assert not marker.exists()


def test_a_git_add_command_only_ever_unstages(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    write(repo, "staged.txt", "x\n")
    git(repo, "add", "staged.txt")
    command = f"git add . ; touch {marker}"
    log = hostile_log(repo, commands_executed=[command])

    result = run_rollback(log, "bug-fixing", confirm=None)

    assert result.report["actions_taken"] == ["Unstaged all files"]
    assert result.report["commands_reverted"] == 1
    assert porcelain(repo) == "?? staged.txt"
    assert not marker.exists()


@pytest.mark.parametrize(
    "sha",
    [
        "--upload-pack=touch {marker}",
        "--exec=touch {marker}",
        "HEAD~1",
        "abc123..def456",
        "abc",
        "abc123 --hard",
        "g123456",
        "a" * 65,
    ],
)
def test_commit_ids_must_be_hex(repo: Path, outside: Path, tmp_path: Path, sha: str) -> None:
    marker = tmp_path / "marker"
    commit = sha.format(marker=marker)
    head = git(repo, "rev-parse", "HEAD")
    log = hostile_log(repo, git_commits=[commit])

    refuse(repo, outside, log, f'Refused git commit id "{commit}"')
    assert git(repo, "rev-parse", "HEAD") == head
    assert not marker.exists()


def test_every_refusal_is_listed_at_once(innocent: Path, outside: Path) -> None:
    log = hostile_log(
        innocent,
        files_created=["src/new.ts", "../x", ".git/config"],
        git_commits=["--upload-pack=x"],
    )

    report = refuse(innocent, outside, log)

    assert len(report["errors"]) == 3


def test_the_workspace_root_is_the_git_top_level(repo: Path) -> None:
    write(repo, "logs/.keep", "")

    assert workspace_root(repo / "logs" / ".bug-changes.json") == repo


def test_outside_git_the_workspace_root_is_the_logs_folder(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()

    assert workspace_root(folder / ".bug-changes.json") == folder.resolve()


def test_an_explicit_workspace_wins_and_must_exist(repo: Path, tmp_path: Path) -> None:
    write(repo, "sub/file.txt", "x\n")

    assert workspace_root(repo / ".log.json", repo / "sub") == repo / "sub"
    with pytest.raises(UnsafePathError, match="Workspace not found"):
        workspace_root(repo / ".log.json", tmp_path / "missing")


def test_an_explicit_workspace_contains_paths_relative_to_itself(repo: Path, outside: Path) -> None:
    write(repo, "sub/new.txt", "x\n")
    write(repo, "top.txt", "x\n")
    log = hostile_log(repo, files_created=["new.txt", "../top.txt"])

    result = run_rollback(log, "bug-fixing", confirm=None, workspace=repo / "sub")

    assert result.exit_code == EXIT_BAD_INPUT
    assert (repo / "sub/new.txt").exists() and (repo / "top.txt").exists()


def test_resolve_refuses_a_nul_byte(repo: Path) -> None:
    with pytest.raises(UnsafePathError, match="NUL"):
        resolve_in_workspace(repo, "a\x00b", where="files_created[0]")
